package node

import (
	"context"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
)

const secretA = "8c1f4a0e2d7b93c65e0a17f2b4d8c391"
const secretB = "00112233445566778899aabbccddeeff"

// TestGuardFromConfig runs a node with rate limiting (loopback not
// exempt) and a cookie secret file: a burst from one source is slipped
// and dropped past the rate, a valid cookie minted from the file's secret
// is never limited, the secret file is re-read on reload (rotation: the
// old secret still verifies as the previous one), a bad secret file
// rejects the reload and keeps serving, and the TCP limits apply.
func TestGuardFromConfig(t *testing.T) {
	cfg := `identity: guard-test
zones:
  - origin: example.com
    file: example.com.zone
rrl:
  responses_per_second: 5
  exempt: []
cookies:
  secret_file: cookie.key
tcp:
  max_connections: 4
  per_prefix: 2
`
	n := startNode(t, map[string]string{
		"steer.yaml":       cfg,
		"example.com.zone": zone("example.com", 1, "hello"),
		"cookie.key":       secretA + "\n",
	}, Options{})
	ask := func(c []byte) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion("gen.example.com.", dns.TypeTXT)
		m.SetEdns0(1232, false)
		if c != nil {
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(c)})
		}
		r, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(m, n.dns.String())
		return r, err
	}
	var answered, slipped, lost int
	for range 20 {
		r, err := ask(nil)
		switch {
		case err != nil:
			lost++
		case r.Truncated && len(r.Answer) == 0:
			slipped++
		default:
			answered++
		}
	}
	if answered < 5 || answered > 7 || slipped < 5 || lost < 5 {
		t.Errorf("20 queries at once past 5/s: %d answered, %d slipped, %d lost", answered, slipped, lost)
	}
	sa, _ := cookie.ParseSecret(secretA)
	sb, _ := cookie.ParseSecret(secretB)
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	from := n.dns.Addr() // the client's address is 127.0.0.1 too
	validA := cookie.NewJar(sa, nil).Mint(nil, client, from, time.Now())
	for i := range 10 {
		if r, err := ask(validA); err != nil || r.Truncated || len(r.Answer) != 1 {
			t.Fatalf("valid cookie, query %d: %v %v", i, r, err)
		}
	}
	// Rotation: B mints, A still verifies.
	writeFile(t, n.dir, "cookie.key", secretB+"\n"+secretA+"\n")
	res, err := n.Reload(context.Background())
	if err != nil || !strings.Contains(strings.Join(res.Changed, "\n"), "cookies: secret file read") {
		t.Fatalf("reload: %v %+v", err, res)
	}
	r, err := ask(validA)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("after rotation, the old cookie: %v %v", r, err)
	}
	var got []byte
	for _, o := range r.IsEdns0().Option {
		if c, ok := o.(*dns.EDNS0_COOKIE); ok {
			got, _ = hex.DecodeString(c.Cookie)
		}
	}
	if cookie.NewJar(sb, nil).Check(got, from, time.Now()).Status != cookie.Valid {
		t.Errorf("after rotation the server cookie %x is not minted with the new secret", got)
	}
	// A broken secret file rejects the reload; the old secrets serve on.
	writeFile(t, n.dir, "cookie.key", "not hex\n")
	if res, err := n.Reload(context.Background()); err == nil || !strings.Contains(strings.Join(res.Problems, "\n"), "steer.yaml:9: cookies.secret_file") {
		t.Fatalf("a bad secret file must reject the reload with its line: %v %+v", err, res)
	}
	if r, err := ask(validA); err != nil || len(r.Answer) != 1 {
		t.Errorf("after the rejected reload: %v %v", r, err)
	}
	// TCP: the third connection from one /24 closes the longest-idle one.
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", n.dns.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		time.Sleep(20 * time.Millisecond)
	}
	conns[0].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil {
		t.Error("the longest-idle connection was not closed past tcp.per_prefix")
	}
}
