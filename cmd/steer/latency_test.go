package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/dnstest"
)

// latencyRecords is shop.example.com steered by latency between three
// sites (pool names are the sites).
const latencyRecords = `records:
  - name: shop.example.com
    ttl: 30
    pools:
      mumbai:    { address: 203.0.113.10,  location: { lat: 19.08, lon: 72.88 } }
      frankfurt: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      virginia:  { address: 192.0.2.30,    location: { lat: 38.95, lon: -77.45 } }
    rules:
      - default: { by: latency, fallback: [mumbai, frankfurt, virginia] }
`

// queryECS asks for name's A record with a client subnet and returns the
// first address and the scope.
func queryECS(addr, name string, subnet netip.Prefix) (string, int, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(subnet.Bits()), Address: subnet.Addr().AsSlice()})
	m.Extra = append(m.Extra, o)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		return "", 0, err
	}
	if len(r.Answer) == 0 {
		return "", 0, fmt.Errorf("no answer: %v", r)
	}
	scope := -1
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				scope = int(s.SourceScope)
			}
		}
	}
	return r.Answer[0].(*dns.A).A.String(), scope, nil
}

// TestLatencySteering runs the server with a latency file and pushes: the
// file's measurements steer from the first answer, each push or file
// version is one anti-flap update, bad input changes nothing, and explain,
// status and metrics show the map.
func TestLatencySteering(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	city, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	writeAtomic(t, filepath.Join(dir, "token"), "s3cret\n")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	csvPath := filepath.Join(dir, "latency.csv")
	t0 := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	writeAtomic(t, csvPath, strings.ReplaceAll(`key,site,rtt_ms,samples,measured_at
# Guwahati's subnet
192.0.2.32/28,mumbai,40,20,T0
192.0.2.32/28,frankfurt,150,20,T0
192.0.2.32/28,virginia,230,20,T0
# the Singapore resolver's network
192.0.2.144/28,mumbai,60,20,T0
192.0.2.144/28,virginia,220,20,T0
`, "T0", t0))
	cfg := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, cfg, fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
geo: { databases: [%q] }
ecs: { max_source_v4: 28 }
latency:
  files: [latency.csv]
  half_life: 0s
  switch_margin: 0.2
  switch_rounds: 3
zones:
  - origin: example.com
    file: example.com.zone
`+latencyRecords+``, addr, apiAddr, city))

	// steer check accepts it.
	if out, err := exec.Command(steerBin, "check", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	p := startSteer(t, cfg, "--watch-interval", "100ms")
	guwahati := netip.MustParsePrefix("192.0.2.32/28")
	answer := func() string {
		a, _, err := queryECS(addr, "shop.example.com.", guwahati)
		if err != nil {
			return "error: " + err.Error()
		}
		return a
	}
	a, scope, err := queryECS(addr, "shop.example.com.", guwahati)
	if err != nil || a != "203.0.113.10" || scope != 28 {
		t.Fatalf("Guwahati: %s scope %d (%v), want Mumbai 203.0.113.10 scope 28\n%s", a, scope, err, p.log())
	}
	if a, _, _ := queryECS(addr, "shop.example.com.", netip.MustParsePrefix("192.0.2.144/28")); a != "203.0.113.10" {
		t.Fatalf("Singapore: %s, want Mumbai", a)
	}

	call := func(method, path, ctype, body string) (int, string) {
		return apiCall(t, apiAddr, "s3cret", method, path, ctype, body)
	}
	// Virginia becomes much faster for Guwahati: the answer moves after
	// exactly three pushes (switch_rounds), not before.
	push := `[{"key":"192.0.2.32/28","site":"virginia","rtt_ms":10,"samples":5,"measured_at":"%s"}]`
	for i := 1; i <= 3; i++ {
		at := time.Now().UTC().Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		if code, body := call("POST", "/v1/latency", "application/json", fmt.Sprintf(push, at)); code != 200 {
			t.Fatalf("push %d: %d %s", i, code, body)
		}
		want := "203.0.113.10"
		if i == 3 {
			want = "192.0.2.30"
		}
		if got := answer(); got != want {
			t.Fatalf("after push %d: %s, want %s\n%s", i, got, want, p.log())
		}
	}
	// A bad push: 400, and nothing changes.
	code, body := call("POST", "/v1/latency", "text/csv", "192.0.2.32/28,mumbai,1,5,2026-11-30T10:00:00Z\n192.0.2.32/28,frankfurt,abc,5,2026-11-30T10:00:00Z\n")
	if code != 400 || !strings.Contains(body, "body:2:") {
		t.Fatalf("bad push: %d %s", code, body)
	}
	_, status := call("GET", "/v1/latency", "", "")
	if !strings.Contains(status, `"update": 4`) {
		t.Fatalf("status after 1 file + 3 pushes + 1 rejected: %s", status)
	}

	// Explain shows every candidate, its RTT and source, and the state.
	code, body = call("GET", "/v1/explain?name=shop.example.com&ecs=192.0.2.32/28", "", "")
	for _, want := range []string{`"latency"`, `"pool": "virginia"`, `"rtt_ms": 10`, `"source": "measured"`, `"key": "192.0.2.32/28"`, `"current": "virginia"`, `"winner": "virginia"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("explain lacks %s: %d %s", want, code, body)
		}
	}

	// A malformed file version is rejected whole with file:line; the
	// answers stay. Line 3 is bad, line 2 would have changed the answer.
	writeAtomic(t, csvPath, "key,site,rtt_ms,samples,measured_at\n192.0.2.32/28,frankfurt,1,5,2026-11-30T10:00:00Z\n192.0.2.32/28,mumbai,fast,5,2026-11-30T10:00:00Z\n")
	dnstest.WaitFor(t, 5*time.Second, `strings.Contains(p.log(), "latency.csv:3: bad rtt_ms")`, func() bool { return strings.Contains(p.log(), "latency.csv:3: bad rtt_ms") }, p.log)
	if got := answer(); got != "192.0.2.30" {
		t.Fatalf("after a rejected file: %s, want Virginia still", got)
	}
	// Three good versions move it to Frankfurt (each version one update).
	for i := 1; i <= 3; i++ {
		at := time.Now().UTC().Add(time.Duration(10+i) * time.Second).Format(time.RFC3339)
		writeAtomic(t, csvPath, fmt.Sprintf("192.0.2.32/28,frankfurt,1,5,%s\n# version %d\n", at, i))
		dnstest.WaitFor(t, 5*time.Second, `strings.Count(p.log(), "latency file applied") >= 1+i`, func() bool { return strings.Count(p.log(), "latency file applied") >= 1+i }, p.log)
		want := "192.0.2.30"
		if i == 3 {
			want = "198.51.100.20"
		}
		if got := answer(); got != want {
			t.Fatalf("after file version %d: %s, want %s", i, got, want)
		}
	}

	_, metrics := call("GET", "/metrics", "", "")
	for _, want := range []string{`steer_latency_updates_total{result="applied",source="push"} 3`, `steer_latency_updates_total{result="rejected",source="push"} 1`,
		`steer_latency_updates_total{result="rejected",source="file"} 1`, "steer_latency_networks "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	p.stop(t)

	// steer check reads latency files too.
	good, _ := os.ReadFile(csvPath)
	writeAtomic(t, csvPath, string(good)+"AS-bogus,mumbai,1,1,2026-11-30T10:00:00Z\n")
	if out, err := exec.Command(steerBin, "check", "--config", cfg).CombinedOutput(); err == nil || !strings.Contains(string(out), "latency.csv:3: bad key") {
		t.Errorf("check with a bad latency file: %v\n%s", err, out)
	}
	writeAtomic(t, csvPath, string(good))

	// steer explain (offline) reads the files and shows the candidates.
	var out bytes.Buffer
	cmd := exec.Command(steerBin, "explain", "--config", cfg, "--ecs", "192.0.2.32/28", "shop.example.com")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("explain: %v\n%s", err, out.String())
	}
	for _, want := range []string{"latency (rule 1", "frankfurt", "measured (key 192.0.2.32/28)", "winner: frankfurt"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestLatencyStaleTimer: with no update at all, a measurement that turns
// stale stops steering once max_age passes (the estimate takes over).
func TestLatencyStaleTimer(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	city, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	// Virginia measured far faster than Mumbai's estimate (about 23 ms
	// from Guwahati), for 2 s.
	writeAtomic(t, filepath.Join(dir, "latency.json"), fmt.Sprintf(`[{"key":"192.0.2.32/28","site":"virginia","rtt_ms":5,"samples":3,"measured_at":%q}]`,
		time.Now().UTC().Format(time.RFC3339)))
	cfg := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, cfg, fmt.Sprintf(`listen: [%q]
geo: { databases: [%q] }
ecs: { max_source_v4: 28 }
latency: { files: [latency.json], max_age: 2s }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      mumbai:    { address: 203.0.113.10,  location: { lat: 19.08, lon: 72.88 } }
      virginia:  { address: 192.0.2.30,    location: { lat: 38.95, lon: -77.45 } }
    rules:
      - default: { by: latency, fallback: [mumbai, virginia] }
`, addr, city))
	p := startSteer(t, cfg, "--log-level", "debug")
	answer := func() string {
		a, _, err := queryECS(addr, "shop.example.com.", netip.MustParsePrefix("192.0.2.32/28"))
		if err != nil {
			return "error: " + err.Error()
		}
		return a
	}
	if got := answer(); got != "192.0.2.30" {
		t.Fatalf("fresh measurement: %s, want Virginia\n%s", got, p.log())
	}
	start := time.Now()
	dnstest.WaitFor(t, 8*time.Second, `answer() == "203.0.113.10"`, func() bool { return answer() == "203.0.113.10" }, answer, p.log)
	t.Logf("Mumbai by estimate %v after start of the wait", time.Since(start).Round(10*time.Millisecond))
	// The re-evaluation logs after it has changed the answer, and the
	// log reaches the test through a pipe: wait for the line too.
	dnstest.WaitFor(t, 2*time.Second, "the stale re-evaluation in the log", func() bool {
		return strings.Contains(p.log(), "a measurement turned stale")
	}, p.log)
	p.stop(t)
}

// TestLatencyBigPush pushes 100,000 measurements through the admin API
// while a client keeps querying over UDP: every query is answered, the
// push lands, and the log records how long it took and the query latency
// before and during (figures, not assertions: the machine is shared).
func TestLatencyBigPush(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 100,000 measurements")
	}
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	city, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	cfg := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, cfg, fmt.Sprintf(`listen: [%q]
api: { listen: %q }
geo: { databases: [%q] }
latency: { half_life: 5m }
zones:
  - origin: example.com
    file: example.com.zone
`+latencyRecords+``, addr, apiAddr, city))
	p := startSteer(t, cfg)
	var body bytes.Buffer
	now := time.Now().UTC().Format(time.RFC3339)
	sites := []string{"mumbai", "frankfurt", "virginia"}
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&body, "%d.%d.%d.0/24,%s,%d,5,%s\n", 1+(i/3)>>16, ((i/3)>>8)&255, (i/3)&255, sites[i%3], 10+(i*37)%200, now)
	}
	// One client queries in ping-pong, recording each round trip.
	measure := func(stop <-chan struct{}) (lat []time.Duration, failed int) {
		c := &dns.Client{Timeout: 2 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := new(dns.Msg)
			m.SetQuestion("shop.example.com.", dns.TypeA)
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{1, byte(i >> 8), byte(i), 0}})
			m.Extra = append(m.Extra, o)
			start := time.Now()
			r, _, err := c.Exchange(m, addr)
			if err != nil || len(r.Answer) == 0 {
				failed++
				continue
			}
			lat = append(lat, time.Since(start))
		}
	}
	summary := func(lat []time.Duration) string {
		if len(lat) == 0 {
			return "no queries"
		}
		slices.Sort(lat)
		return fmt.Sprintf("%d queries, p50 %v, p99 %v, max %v", len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	stop := make(chan struct{})
	time.AfterFunc(time.Second, func() { close(stop) })
	idle, failed := measure(stop)
	if failed > 0 {
		t.Fatalf("%d queries failed before the push", failed)
	}
	stop = make(chan struct{})
	type result struct {
		lat    []time.Duration
		failed int
	}
	during := make(chan result)
	go func() {
		lat, failed := measure(stop)
		during <- result{lat, failed}
	}()
	start := time.Now()
	req, _ := http.NewRequest("POST", "http://"+apiAddr+"/v1/latency", &body)
	req.Header.Set("Content-Type", "text/csv")
	res, err := http.DefaultClient.Do(req)
	took := time.Since(start)
	close(stop)
	d := <-during
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(out), `"applied": 100000`) {
		t.Fatalf("push: %d %s", res.StatusCode, out)
	}
	if d.failed > 0 {
		t.Fatalf("%d queries failed during the push", d.failed)
	}
	t.Logf("100,000-entry push over HTTP took %v: %s", took.Round(time.Millisecond), strings.Join(strings.Fields(string(out)), " "))
	t.Logf("queries with no push (1 s): %s", summary(idle))
	t.Logf("queries during the push:    %s", summary(d.lat))
	// The pushed map steers: 1.0.0.0/24 measured Mumbai 10 ms.
	if a, _, err := queryECS(addr, "shop.example.com.", netip.MustParsePrefix("1.0.0.0/24")); err != nil || a != "203.0.113.10" {
		t.Fatalf("1.0.0.0/24 after the push: %s %v", a, err)
	}
	p.stop(t)
}
