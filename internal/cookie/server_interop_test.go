package cookie_test

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
)

// startSteer serves interopZone from an in-process steer answering
// cookies with interopSecret.
func startSteer(t *testing.T) *servertest.Server {
	t.Helper()
	s := servertest.Start(t, map[string]string{
		"steer.yaml":        "identity: interop\nzones:\n  - origin: example.test\n    file: example.test.zone\n",
		"example.test.zone": interopZone,
	})
	sec, _ := cookie.ParseSecret(interopSecret)
	s.Handler().SetGuard(&dnsserver.Guard{Cookies: cookie.NewJar(sec, nil)})
	return s
}

// TestServerInterop puts steer's server in the place of a peer: the
// checks the peers pass, steer passes too (a client cookie alone gets
// NOERROR and a cookie that verifies; a valid fresh one is echoed; forged
// and stale ones get a fresh cookie).
func TestServerInterop(t *testing.T) {
	s := startSteer(t)
	sec, _ := cookie.ParseSecret(interopSecret)
	steer := interopPeer{name: "steer", clientOnlyRcode: dns.RcodeSuccess, badRcode: dns.RcodeSuccess, echoes: true}
	checkPeer(t, steer, cookie.NewJar(sec, nil), s.V4.String(), s.V4.Addr())
}

var kdigCookie = regexp.MustCompile(`(?m)^;+ COOKIE: ([0-9a-fA-F]+)(?: \(([a-z]+)\))?`)

// kdig runs kdig +cookie=hex against addr and returns the cookie it
// printed and what kdig made of it ("good", "bad" or "").
func kdigAsk(t *testing.T, addr netip.AddrPort, hexCookie string, extra ...string) (string, string, string) {
	t.Helper()
	args := append([]string{"+cookie=" + hexCookie, "+nobadcookie", "www.example.test", "A"}, extra...)
	out := dnstest.Kdig(t, addr, args...)
	m := kdigCookie.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kdig printed no cookie:\n%s", out)
	}
	status := ""
	if i := strings.Index(out, "status: "); i >= 0 {
		status = strings.Fields(out[i+len("status: "):])[0]
	}
	return strings.ToLower(m[1]), m[2], strings.TrimRight(status, ",;")
}

// TestKdigCookiesAcrossServers is issue 14's interop check with a real
// client: kdig +cookie against steer and Knot, NSD and BIND configured
// with one secret. The server cookies minted in the same second for the
// same client cookie are identical, and a cookie minted by any one of them
// is accepted (echoed or re-minted valid, never refused) by every other.
func TestKdigCookiesAcrossServers(t *testing.T) {
	dnstest.NeedTool(t, "kdig")
	servers := map[string]netip.AddrPort{"steer": startSteer(t).V4}
	for _, p := range interopPeers {
		dnstest.NeedTool(t, p.binary)
		servers[p.name] = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(startPeer(t, p, false)))
	}
	client := hex.EncodeToString(interopClient[:])
	sec, _ := cookie.ParseSecret(interopSecret)
	jar := cookie.NewJar(sec, nil)
	local := netip.MustParseAddr("127.0.0.1")

	// The same second: retry the round until every server stamped alike.
	var minted map[string]string
	for try := 0; try < 5; try++ {
		minted = map[string]string{}
		stamps := map[uint32]bool{}
		for name, addr := range servers {
			c, _, _ := kdigAsk(t, addr, client)
			b, _ := hex.DecodeString(c)
			if len(b) != cookie.MintLen {
				t.Fatalf("%s minted %s for a client cookie alone", name, c)
			}
			minted[name] = c
			stamps[binary.BigEndian.Uint32(b[12:16])] = true
		}
		if len(stamps) == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, c := range minted {
		if c != minted["steer"] {
			t.Errorf("same second, same client cookie: %s minted %s, steer %s", name, c, minted["steer"])
		}
	}
	t.Logf("minted in one second by all four: %s", minted["steer"])

	// Cross-acceptance: each server's cookie (a minute old, so that it is
	// not the one a server would mint now) presented to each server.
	for from := range servers {
		var b []byte
		if from == "steer" {
			b = jar.Mint(nil, interopClient, local, time.Now().Add(-time.Minute))
		} else {
			// The peer's own fresh cookie.
			c, _, _ := kdigAsk(t, servers[from], client)
			b, _ = hex.DecodeString(c)
		}
		for to, addr := range servers {
			got, verdict, status := kdigAsk(t, addr, hex.EncodeToString(b))
			back, _ := hex.DecodeString(got)
			res := jar.Check(back, local, time.Now())
			if status != "NOERROR" || res.Status != cookie.Valid || verdict == "bad" {
				t.Errorf("%s's cookie %x at %s: %s, cookie back %s (%s, checks here as %v)", from, b, to, status, got, verdict, res.Status)
			}
		}
	}
}
