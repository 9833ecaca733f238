package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/geo"
)

// The package's tests start about sixty nodes, most against the embedded
// database: its partition is compiled once, not once a build (0.8 s of
// CPU each under the race detector; the TestFleet* tests under -race took
// 116 s wall, 89 s CPU compiling it per node, 77 s and 49 s sharing it).
func init() { geo.SharePartitions() }

// testNode is a whole node running in this process on free loopback
// ports: health, latency, metrics, query log and API as configured.
type testNode struct {
	*Node
	t    *testing.T
	dir  string
	logs *dnstest.LockedBuffer
	dns  netip.AddrPort
}

// writeFile replaces dir/name atomically (a reader sees the old file or
// the new one).
func writeFile(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

// zone is a small example.com-style zone for origin with serial and a
// TXT record at gen.
func zone(origin string, serial int, txt string) string {
	return fmt.Sprintf(`$ORIGIN %s.
$TTL 300
@    SOA ns1 hostmaster %d 7200 3600 1209600 60
     NS  ns1
ns1  A   192.0.2.53
gen  TXT %q
`, origin, serial, txt)
}

// startNode writes files into a new directory and runs a node on its
// steer.yaml, listening on a free port of 127.0.0.1; o may set hooks.
func startNode(t *testing.T, files map[string]string, o Options) *testNode {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		writeFile(t, dir, name, body)
	}
	return startNodeIn(t, dir, o)
}

func startNodeIn(t *testing.T, dir string, o Options) *testNode {
	t.Helper()
	logs := &dnstest.LockedBuffer{}
	o.ConfigPath = filepath.Join(dir, "steer.yaml")
	if o.Listen == nil {
		o.Listen = []string{"127.0.0.1:0"}
	}
	if o.WatchInterval == 0 {
		o.WatchInterval = 50 * time.Millisecond
	}
	o.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n, err := New(o)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("node.Start: %v\n%s", err, logs)
	}
	tn := &testNode{Node: n, t: t, dir: dir, logs: logs, dns: n.Addrs()[0]}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
		if t.Failed() {
			t.Logf("node log:\n%s", logs)
		}
	})
	return tn
}

// query asks the node over UDP.
func (n *testNode) query(name string, qtype uint16) *dns.Msg {
	n.t.Helper()
	r, err := n.tryQuery(name, qtype)
	if err != nil {
		n.t.Fatalf("query %s: %v", name, err)
	}
	return r
}

// tryQuery is query for a poll: an unanswered UDP query (a loaded
// machine drops one now and then) is an error to retry, not the end.
func (n *testNode) tryQuery(name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
	return r, err
}

// txt returns the TXT answer for name, or the rcode's name.
func (n *testNode) txt(name string) string {
	r := n.query(name, dns.TypeTXT)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return dns.RcodeToString[r.Rcode]
	}
	return strings.Join(r.Answer[0].(*dns.TXT).Txt, "")
}

// a returns the first A answer for name.
func (n *testNode) a(name string) string {
	r := n.query(name, dns.TypeA)
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return dns.RcodeToString[r.Rcode] + " with no A"
}

// call makes an admin API request; token "" sends none.
func (n *testNode) call(method, path, token, body string) (int, string) {
	n.t.Helper()
	return callAPI(n.t, n.APIAddr(), method, path, token, body)
}

func callAPI(t testing.TB, addr, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.HasPrefix(body, "[") || strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func apiCfg(listen string) config.API { return config.API{Listen: listen} }
