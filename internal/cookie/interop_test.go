package cookie_test

// Interoperability with the RFC 9018 implementations steer shares anycast
// addresses with: Knot (mod-cookies), NSD (answer-cookie) and BIND
// (cookie-algorithm siphash24), each started here with the same secret.
// The test is external (package cookie_test) so that it may use servertest,
// which imports the server that imports this package.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnstest"
)

// interopSecret is the secret every peer and the jar share.
const interopSecret = "8c1f4a0e2d7b93c65e0a17f2b4d8c391"

// interopClient is the fixed client cookie the test sends.
var interopClient = [8]byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}

const interopZone = `$ORIGIN example.test.
$TTL 300
@    SOA ns1 hostmaster 1 7200 3600 1209600 300
@    NS  ns1
ns1  A   127.0.0.1
www  A   192.0.2.1
`

// A peer: how to configure and run it, and how it treats cookies.
type interopPeer struct {
	name, binary string
	// config writes the configuration into dir for a server on port of
	// 127.0.0.1 and, with v6, of ::1, and returns the command line.
	config func(t *testing.T, dir string, port int, v6 bool) []string
	// clientOnlyRcode is its answer to a query with a client cookie only.
	clientOnlyRcode int
	// badRcode is its answer to a server cookie that does not verify.
	badRcode int
	// echoes says a valid, fresh cookie comes back unchanged (rather than
	// re-minted each time), which makes its acceptance visible even when
	// the rcode would not be.
	echoes bool
}

var interopPeers = []interopPeer{
	{
		// Knot answers BADCOOKIE (with a cookie) to a client cookie
		// alone and to a bad server cookie, by design (badcookie-slip 1),
		// so NOERROR shows acceptance. (3.2.6 also echoes a valid fresh
		// cookie; not relied on.)
		name: "knot", binary: "knotd",
		clientOnlyRcode: dns.RcodeBadCookie, badRcode: dns.RcodeBadCookie,
		config: func(t *testing.T, dir string, port int, v6 bool) []string {
			listen := fmt.Sprintf("127.0.0.1@%d", port)
			if v6 {
				listen = fmt.Sprintf("[ 127.0.0.1@%d, ::1@%d ]", port, port)
			}
			conf := fmt.Sprintf(`server:
  rundir: %[1]q
  listen: %[5]s
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
log:
  - target: stderr
    any: info
database:
  storage: %[1]q
mod-cookies:
  - id: steer
    secret: 0x%[3]s
template:
  - id: default
    storage: %[1]q
    zonefile-sync: -1
    journal-content: none
    global-module: mod-cookies/steer
zone:
  - domain: example.test
    file: %[4]q
`, dir, port, interopSecret, filepath.Join(dir, "example.test.zone"), listen)
			writeFile(t, filepath.Join(dir, "knot.conf"), conf)
			return []string{"knotd", "-c", filepath.Join(dir, "knot.conf")}
		},
	},
	{
		// NSD answers every cookie NOERROR (it has no
		// require-server-cookie), re-minting one that does not verify
		// and echoing a valid one younger than half an hour.
		name: "nsd", binary: "nsd",
		clientOnlyRcode: dns.RcodeSuccess, badRcode: dns.RcodeSuccess, echoes: true,
		config: func(t *testing.T, dir string, port int, v6 bool) []string {
			listen := fmt.Sprintf("  ip-address: 127.0.0.1@%d\n  do-ip6: no", port)
			if v6 {
				listen = fmt.Sprintf("  ip-address: 127.0.0.1@%d\n  ip-address: ::1@%d\n  do-ip6: yes", port, port)
			}
			conf := fmt.Sprintf(`server:
%[8]s
  port: %[2]d
  username: ""
  chroot: ""
  zonesdir: %[1]q
  pidfile: %[3]q
  xfrdfile: %[4]q
  zonelistfile: %[5]q
  xfrdir: %[1]q
  database: ""
  server-count: 1
  verbosity: 1
  answer-cookie: yes
  cookie-secret: %[6]q
remote-control:
  control-enable: no
zone:
  name: example.test
  zonefile: %[7]q
`, dir, port, filepath.Join(dir, "nsd.pid"), filepath.Join(dir, "xfrd.state"), filepath.Join(dir, "zone.list"),
				interopSecret, filepath.Join(dir, "example.test.zone"), listen)
			writeFile(t, filepath.Join(dir, "nsd.conf"), conf)
			return []string{"nsd", "-d", "-c", filepath.Join(dir, "nsd.conf")}
		},
	},
	{
		// BIND re-mints on every answer; with require-server-cookie it
		// answers BADCOOKIE on UDP unless the server cookie verifies, so
		// NOERROR shows acceptance.
		name: "bind", binary: "named",
		clientOnlyRcode: dns.RcodeBadCookie, badRcode: dns.RcodeBadCookie,
		config: func(t *testing.T, dir string, port int, v6 bool) []string {
			listen6 := "{ none; }"
			if v6 {
				listen6 = fmt.Sprintf("port %d { ::1; }", port)
			}
			conf := fmt.Sprintf(`options {
	directory %[1]q;
	pid-file %[3]q;
	session-keyfile %[4]q;
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 %[7]s;
	recursion no;
	dnssec-validation no;
	notify no;
	cookie-algorithm siphash24;
	cookie-secret %[5]q;
	require-server-cookie yes;
};
zone "example.test" { type primary; file %[6]q; };
`, dir, port, filepath.Join(dir, "named.pid"), filepath.Join(dir, "session.key"), interopSecret,
				filepath.Join(dir, "example.test.zone"), listen6)
			writeFile(t, filepath.Join(dir, "named.conf"), conf)
			return []string{"named", "-g", "-n", "1", "-c", filepath.Join(dir, "named.conf")}
		},
	},
}

func TestInterop(t *testing.T) {
	sec, err := cookie.ParseSecret(interopSecret)
	if err != nil {
		t.Fatal(err)
	}
	jar := cookie.NewJar(sec, nil)
	v6 := hasIPv6Loopback()
	for _, p := range interopPeers {
		t.Run(p.name, func(t *testing.T) {
			dnstest.NeedTool(t, p.binary)
			port := startPeer(t, p, v6)
			locals := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
			if v6 {
				locals = append(locals, netip.IPv6Loopback())
			} else {
				t.Log("no ::1 here: IPv4 only")
			}
			for _, local := range locals {
				t.Run(local.String(), func(t *testing.T) {
					checkPeer(t, p, jar, netip.AddrPortFrom(local, uint16(port)).String(), local)
				})
			}
		})
	}
}

// checkPeer runs the interop checks against the peer at addr, which sees
// the test's queries come from local.
func checkPeer(t *testing.T, p interopPeer, jar *cookie.Jar, addr string, local netip.Addr) {
	// (a) and (b): the cookie the peer mints for a client cookie
	// alone verifies here and is byte for byte what Mint makes
	// from its timestamp.
	r, got := ask(t, addr, interopClient[:])
	if r.Rcode != p.clientOnlyRcode {
		t.Errorf("client cookie only: %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[p.clientOnlyRcode])
	}
	if len(got) != cookie.MintLen || !bytes.Equal(got[:8], interopClient[:]) {
		t.Fatalf("client cookie only: the peer returned cookie %x, want %x and a 16-byte server cookie", got, interopClient)
	}
	t.Logf("client cookie only: %s, cookie %x", dns.RcodeToString[r.Rcode], got)
	if res := jar.Check(got, local, time.Now()); res.Status != cookie.Valid || res.Remint {
		t.Errorf("the peer's cookie %x checks here as %v (remint %v), want valid", got, res.Status, res.Remint)
	}
	ts := time.Unix(int64(binary.BigEndian.Uint32(got[12:16])), 0)
	if mine := jar.Mint(nil, interopClient, local, ts); !bytes.Equal(mine, got) {
		t.Errorf("at the peer's timestamp %d Mint gives %x, the peer %x", ts.Unix(), mine, got)
	}

	// (c) a cookie minted here, a minute old, is accepted: NOERROR
	// with the answer, and a cookie back that verifies here (for
	// an echoing peer, the same one).
	mine := jar.Mint(nil, interopClient, local, time.Now().Add(-time.Minute))
	r, got = ask(t, addr, mine)
	t.Logf("steer's cookie %x: %s, cookie %x", mine, dns.RcodeToString[r.Rcode], got)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("steer's cookie: %s with %d answers, want NOERROR and the A record", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if res := jar.Check(got, local, time.Now()); res.Status != cookie.Valid {
		t.Errorf("the peer answered steer's cookie with %x, which checks here as %v", got, res.Status)
	}
	if p.echoes && !bytes.Equal(got, mine) {
		t.Errorf("the peer re-minted a valid fresh cookie (%x for %x): it did not accept it", got, mine)
	}

	// Controls, so that acceptance above means something: a
	// forged hash and a two-hour-old cookie are rejected.
	forged := bytes.Clone(mine)
	forged[23] ^= 0xff
	stale := jar.Mint(nil, interopClient, local, time.Now().Add(-2*time.Hour))
	for name, bad := range map[string][]byte{"forged hash": forged, "two hours old": stale} {
		r, got := ask(t, addr, bad)
		t.Logf("%s %x: %s, cookie %x", name, bad, dns.RcodeToString[r.Rcode], got)
		if r.Rcode != p.badRcode {
			t.Errorf("%s: %s, want %s", name, dns.RcodeToString[r.Rcode], dns.RcodeToString[p.badRcode])
		}
		if bytes.Equal(got, bad) {
			t.Errorf("%s: the peer echoed it", name)
		}
		if res := jar.Check(got, local, time.Now()); res.Status != cookie.Valid {
			t.Errorf("%s: the peer's fresh cookie %x checks here as %v", name, got, res.Status)
		}
	}
}

// ask sends www.example.test A with the COOKIE payload opt and returns
// the response and its COOKIE payload.
func ask(t *testing.T, addr string, opt []byte) (*dns.Msg, []byte) {
	t.Helper()
	m := dnstest.Query("www.example.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	e := m.IsEdns0()
	e.Option = append(e.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(opt)})
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("query with cookie %x: %v", opt, err)
	}
	return r, responseCookie(t, r)
}

func responseCookie(t *testing.T, r *dns.Msg) []byte {
	t.Helper()
	if e := r.IsEdns0(); e != nil {
		for _, o := range e.Option {
			if c, ok := o.(*dns.EDNS0_COOKIE); ok {
				b, err := hex.DecodeString(c.Cookie)
				if err != nil {
					t.Fatalf("cookie %q: %v", c.Cookie, err)
				}
				return b
			}
		}
	}
	t.Fatalf("response without a COOKIE option:\n%v", r)
	return nil
}

// startPeer writes the zone and configuration to a temporary directory,
// starts the peer on a free loopback port and waits (at most 10 s) until
// it answers the zone's SOA with authority. The process (and the process
// group it leads, for NSD's children) is stopped when the test ends.
func startPeer(t *testing.T, p interopPeer, v6 bool) int {
	t.Helper()
	var lastLog string
	hosts := []string{"127.0.0.1"}
	if v6 {
		hosts = append(hosts, "::1")
	}
	for attempt := 0; attempt < 3; attempt++ {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "example.test.zone"), interopZone)
		port := dnstest.FreePort(t, hosts...)
		args := p.config(t, dir, port, v6)
		log := &dnstest.LockedBuffer{}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		pid := cmd.Process.Pid
		stop := func() {
			syscall.Kill(-pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-pid, syscall.SIGKILL)
				<-exited
			}
		}
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
		if waitSOA(addr, exited) {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("%s log:\n%s", p.name, log.String())
				}
			})
			return port
		}
		stop()
		lastLog = log.String()
	}
	t.Fatalf("%s did not answer within 10 s:\n%s", p.name, lastLog)
	return 0
}

func waitSOA(addr string, exited <-chan struct{}) bool {
	m := dnstest.Query("example.test.", dns.TypeSOA)
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return false
		default:
		}
		if r, _, err := c.Exchange(m, addr); err == nil && r.Rcode == dns.RcodeSuccess && r.Authoritative && len(r.Answer) == 1 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// hasIPv6Loopback reports whether ::1 can be listened on here.
func hasIPv6Loopback() bool {
	u, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		return false
	}
	u.Close()
	return true
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
