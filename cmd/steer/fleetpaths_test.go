package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
)

// TestFleetNodePaths runs two fleet nodes as the packaged unit would, in
// working directories that are not their configuration's, serving a
// configuration pushed with steer fleet push that names an absolute geo
// database, latency file, feed file and API token, a TSIG key and a zone that
// $INCLUDEs another file:
//   - the zone (with what it includes) and the key come from the bundle:
//     the included name answers and a TSIG-signed AXFR is served;
//   - the geo database, latency and feed files are the node's own:
//     latency steering answers, and a change of the latency file or the
//     feed file is applied (both are watched in fleet mode);
//   - node A's own api wins over the pushed one, and stays on after a
//     push without api; node B, with none of its own, serves the pushed
//     api with the pushed (absolute) token file;
//   - CHAOS id.server and NSID answer each node's identity: node A's
//     name by default, node B's own identity;
//   - push refuses a relative geo path and a zone outside the
//     configuration's directory with file:line, and publishes nothing;
//   - steer check refuses a node's file holding records, with file:line.
func TestFleetNodePaths(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
	c := etcdtest.Start(t, etcdtest.Options{})
	ep := strings.Join(c.Endpoints(), ",")
	root := t.TempDir()
	mk := func(parts ...string) string {
		p := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	etc, data, nodeA, nodeB := mk("etc-steer"), mk("data"), mk("node-a"), mk("node-b")
	cwdA, cwdB := mk("var-lib-steer"), mk("elsewhere", "deeper")
	city, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	addrA, addrB := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiA, apiPushed := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	const xfrSecret = "bnNkIHNlY29uZGFyeSBrZXkgb2YgdGhpcnR5LXR3byE="

	writeAtomic(t, filepath.Join(data, "pushed.token"), "pushed-secret\n")
	latencyFile := filepath.Join(data, "latency.csv")
	latency := func(mumbai, virginia int, at time.Time) string {
		ts := at.UTC().Format(time.RFC3339)
		return fmt.Sprintf("key,site,rtt_ms,samples,measured_at\n192.0.2.32/28,mumbai,%d,20,%s\n192.0.2.32/28,virginia,%d,20,%s\n", mumbai, ts, virginia, ts)
	}
	writeAtomic(t, latencyFile, latency(40, 230, time.Now().Add(-time.Minute)))
	feedFile := filepath.Join(data, "feed.json")
	writeAtomic(t, feedFile, "{}\n")
	os.MkdirAll(filepath.Join(etc, "zones", "inc"), 0o755)
	writeAtomic(t, filepath.Join(etc, "zones", "inc", "extra.zone"), "inc TXT \"included\"\n")
	writeAtomic(t, filepath.Join(etc, "xfr.key"), fmt.Sprintf("key \"xfr-key\" {\n\talgorithm hmac-sha256;\n\tsecret %q;\n};\n", xfrSecret))
	pushed := func(serial int, api bool) string {
		writeAtomic(t, filepath.Join(etc, "zones", "example.com.zone"), zoneText(serial, fmt.Sprintf("pushed-%d", serial))+"$INCLUDE inc/extra.zone\n")
		a := ""
		if api {
			a = fmt.Sprintf("api: { listen: %q, token_file: %s }\n", apiPushed, filepath.Join(data, "pushed.token"))
		}
		p := filepath.Join(etc, "steer.yaml")
		writeAtomic(t, p, a+fmt.Sprintf(`geo: { databases: [%s] }
ecs: { max_source_v4: 28 }
latency: { files: [%s], half_life: 0s, switch_margin: 0.2, switch_rounds: 1 }
health: { feed_file: %s }
tsig:
  xfr-key: { secret_file: xfr.key }
zones:
  - origin: example.com
    file: zones/example.com.zone
    secondaries: [ { address: 127.0.0.1, tsig: xfr-key, notify: none } ]
`, city, latencyFile, feedFile)+latencyRecords)
		return p
	}
	var out, errb bytes.Buffer
	push := func(p string) (int, string) {
		out.Reset()
		errb.Reset()
		rc := run([]string{"fleet", "push", "--config", p, "--etcd", ep}, &out, &errb)
		return rc, out.String() + errb.String()
	}
	if rc, msg := push(pushed(1, true)); rc != 0 || !strings.Contains(msg, "serial 1") || !strings.Contains(msg, "4 files") {
		t.Fatalf("push: rc %d, %s", rc, msg)
	}

	fleetSection := func(node string) string {
		return fmt.Sprintf("fleet:\n  node: %s\n  etcd: { endpoints: [%s], dial_timeout: 1s }\n  lease_ttl: 2s\n", node, ep)
	}
	writeAtomic(t, filepath.Join(nodeA, "a.token"), "token-a\n")
	writeAtomic(t, filepath.Join(nodeA, "steer.yaml"), fmt.Sprintf("listen: [%q]\napi: { listen: %q, token_file: a.token }\n", addrA, apiA)+fleetSection("pop-a"))
	writeAtomic(t, filepath.Join(nodeB, "steer.yaml"), fmt.Sprintf("listen: [%q]\nidentity: ns-b.example\n", addrB)+fleetSection("pop-b"))
	pa := startSteerIn(t, cwdA, filepath.Join(nodeA, "steer.yaml"), "--watch-interval", "100ms")
	startSteerIn(t, cwdB, filepath.Join(nodeB, "steer.yaml"), "--watch-interval", "100ms")

	txt := func(addr, name string) string {
		r, err := query(addr, name, dns.TypeTXT)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprintf("%v %v", r, err)
		}
		return strings.Join(r.Answer[0].(*dns.TXT).Txt, "")
	}
	guwahati := netip.MustParsePrefix("192.0.2.32/28")
	for _, addr := range []string{addrA, addrB} {
		if got := txt(addr, "gen.example.com."); got != "pushed-1" {
			t.Fatalf("%s: gen %q, want pushed-1\n%s", addr, got, pa.log())
		}
		if got := txt(addr, "inc.example.com."); got != "included" {
			t.Errorf("%s: the $INCLUDEd name answers %q", addr, got)
		}
		if a, scope, err := queryECS(addr, "shop.example.com.", guwahati); err != nil || a != "203.0.113.10" || scope != 28 {
			t.Errorf("%s: latency-steered answer %s scope %d (%v), want Mumbai 203.0.113.10 scope 28", addr, a, scope, err)
		}
	}
	// The TSIG key came with the bundle: a signed AXFR is served.
	m := new(dns.Msg)
	m.SetAxfr("example.com.")
	m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
	env, err := (&dns.Transfer{TsigSecret: map[string]string{"xfr-key.": xfrSecret}}).In(m, addrA)
	n := 0
	if err == nil {
		for e := range env {
			if e.Error != nil {
				err = e.Error
			}
			n += len(e.RR)
		}
	}
	if err != nil || n < 5 {
		t.Errorf("TSIG-signed AXFR from node A: %d records, %v", n, err)
	}

	// The APIs: node A's own (its token), node B the pushed one.
	if code, body := apiCall(t, apiA, "token-a", "GET", "/v1/status", "", ""); code != 200 {
		t.Errorf("node A's own API: %d %s", code, body)
	}
	if code, body := apiCall(t, apiPushed, "pushed-secret", "GET", "/v1/status", "", ""); code != 200 {
		t.Errorf("the pushed API on node B, with the pushed absolute token file: %d %s", code, body)
	}

	// Identities: CHAOS id.server and NSID.
	chaos := func(addr string) string {
		q := new(dns.Msg)
		q.SetQuestion("id.server.", dns.TypeTXT)
		q.Question[0].Qclass = dns.ClassCHAOS
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, addr)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprintf("%v %v", r, err)
		}
		return r.Answer[0].(*dns.TXT).Txt[0]
	}
	if a, b := chaos(addrA), chaos(addrB); a != "pop-a" || b != "ns-b.example" {
		t.Errorf("id.server: node A %q (want its name pop-a), node B %q (want ns-b.example)", a, b)
	}
	for addr, want := range map[string]string{addrA: "pop-a", addrB: "ns-b.example"} {
		host, port, _ := strings.Cut(addr, ":")
		kd, err := exec.Command("kdig", "@"+host, "-p", port, "+nsid", "+notcp", "example.com.", "SOA").CombinedOutput()
		if err != nil {
			t.Fatalf("kdig: %v\n%s", err, kd)
		}
		if !strings.Contains(string(kd), "NSID: ") || !strings.Contains(string(kd), `"`+want+`"`) {
			t.Errorf("kdig +nsid against %s: want NSID %q in\n%s", addr, want, kd)
		}
	}

	// The latency file is watched: Virginia becomes fastest.
	writeAtomic(t, latencyFile, latency(200, 5, time.Now()))
	dnstest.WaitFor(t, 5*time.Second, "node A to steer Guwahati to Virginia after the latency file changed", func() bool {
		a, _, _ := queryECS(addrA, "shop.example.com.", guwahati)
		return a == "192.0.2.30"
	}, pa.log)

	// The feed file is watched too: Virginia set down by it.
	writeAtomic(t, feedFile, `{"pools": {"shop.example.com/virginia": {"state": "down"}}}`)
	dnstest.WaitFor(t, 5*time.Second, "node A to stop answering Virginia once the feed file sets it down", func() bool {
		a, _, _ := queryECS(addrA, "shop.example.com.", guwahati)
		return a == "203.0.113.10" || a == "198.51.100.20"
	}, pa.log)

	// A push without api: node A keeps its own.
	if rc, msg := push(pushed(2, false)); rc != 0 || !strings.Contains(msg, "serial 2") {
		t.Fatalf("second push: rc %d, %s", rc, msg)
	}
	dnstest.WaitFor(t, 5*time.Second, "node A to serve the second push", func() bool { return txt(addrA, "gen.example.com.") == "pushed-2" }, pa.log)
	if code, body := apiCall(t, apiA, "token-a", "GET", "/v1/status", "", ""); code != 200 {
		t.Errorf("node A's own API after a push without api: %d %s", code, body)
	}
	if strings.Contains(pa.log(), "api off") {
		t.Errorf("node A switched its API off:\n%s", pa.log())
	}

	// Refused pushes: a relative geo database, a zone outside the
	// configuration's directory.
	writeAtomic(t, filepath.Join(etc, "city.mmdb"), string(must(os.ReadFile(city))))
	writeAtomic(t, filepath.Join(root, "outside.zone"), strings.ReplaceAll(zoneText(1, "x"), "example.com.", "example.net."))
	bad := filepath.Join(etc, "bad.yaml")
	writeAtomic(t, bad, "geo: { databases: [city.mmdb] }\nzones:\n  - origin: example.com\n    file: zones/example.com.zone\n  - origin: example.net\n    file: ../outside.zone\n")
	rc, msg := push(bad)
	for _, want := range []string{
		bad + `:1: geo.databases[0]: "city.mmdb" is relative: in a pushed configuration a node-local file is named by its absolute path on each node`,
		bad + `:6: zones[1].file: "../outside.zone" is outside the configuration's directory`,
		"nothing was pushed",
	} {
		if rc != 1 || !strings.Contains(msg, want) {
			t.Errorf("push of %s: rc %d, want %q in\n%s", bad, rc, want, msg)
		}
	}
	out.Reset()
	if rc := run([]string{"fleet", "status", "--etcd", ep}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "published: serial 2") {
		t.Errorf("after refused pushes: rc %d\n%s", rc, out.String())
	}

	// steer check on a node's file holding records.
	badNode := filepath.Join(nodeA, "bad-node.yaml")
	writeAtomic(t, badNode, fleetSection("pop-a")+latencyRecords)
	chk, err := exec.Command(steerBin, "check", "--config", badNode).CombinedOutput()
	if want := badNode + ":5: records: this is a fleet node's file (it has a fleet section): records belongs in the configuration pushed with steer fleet push"; err == nil || !strings.Contains(string(chk), want) {
		t.Errorf("steer check of a node file with records: %v, want %q in\n%s", err, want, chk)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
