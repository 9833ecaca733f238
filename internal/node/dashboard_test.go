package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/policy"
)

// healthTarget is a real HTTP health-check target on addr:port answering
// 200 at /healthz until stopped.
type healthTarget struct {
	srv *http.Server
	ln  net.Listener
}

func startTarget(t *testing.T, addr string, port int) *healthTarget {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", addr, port))
	if err != nil {
		t.Fatalf("target %s: %v", addr, err)
	}
	ht := &healthTarget{ln: ln, srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})}}
	go ht.srv.Serve(ln)
	t.Cleanup(ht.stop)
	return ht
}

func (h *healthTarget) stop() { h.srv.Close() }

// dashConfig has one record with a pool in every situation the
// overview's "why no traffic" tells apart, and filler records for paging.
func dashConfig(port, fillers int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `api: { listen: "127.0.0.1:0" }
ecs: { enabled: true }
node: { name: n1, location: { lat: 52.52, lon: 13.40 } }
zones:
  - origin: example.com
    file: example.com.zone
health_checks:
  web: { type: http, port: %d, path: /healthz, interval: 100ms, timeout: 100ms, rise: 1, fall: 1 }
policies:
  pair:
    rules:
      - default: { failover: [one, two] }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      mumbai:    { address: 127.0.0.2, health_check: web, location: { lat: 19.08, lon: 72.88 } }
      frankfurt: { address: 127.0.0.3, health_check: web, location: { lat: 50.11, lon: 8.68 } }
      standby:   { address: 192.0.2.9 }
      spare:     { address: 192.0.2.10 }
      zero:      { address: 192.0.2.11 }
      off:       { address: 192.0.2.12, enabled: false }
      held:      { address: 192.0.2.13 }
    rules:
      - match: { country: [IN, LK] }
        split: [ { pool: mumbai, weight: 3 }, { pool: zero, weight: 0 } ]
      - default: { failover: [frankfurt, standby, held] }
`, port)
	for i := range fillers {
		fmt.Fprintf(&b, `  - name: f%04d.example.com
    policy: pair
    pools:
      one: { address: 192.0.2.%d }
      two: { address: 192.0.2.%d }
`, i, 20+i%200, 21+i%200)
	}
	return b.String()
}

const dashZone = "$ORIGIN example.com.\n$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.53\n"

func overview(t *testing.T, n *testNode, query string) api.Overview {
	t.Helper()
	code, body := n.call("GET", "/v1/overview?"+query, "", "")
	if code != 200 {
		t.Fatalf("overview %s: %d %s", query, code, body)
	}
	var ov api.Overview
	if err := json.Unmarshal([]byte(body), &ov); err != nil {
		t.Fatal(err)
	}
	return ov
}

func poolOf(ov api.Overview, record, pool string) *api.OverviewPool {
	for i := range ov.Records {
		if ov.Records[i].Name == record {
			for j := range ov.Records[i].Pools {
				if ov.Records[i].Pools[j].Name == pool {
					return &ov.Records[i].Pools[j]
				}
			}
		}
	}
	return nil
}

// TestDashboardOverview runs a node with real HTTP health targets: the
// overview's states, reasons, why-no-traffic, drain safety, paging and
// the event that follows a target going down.
func TestDashboardOverview(t *testing.T) {
	port := dnstest.FreePort(t, "127.0.0.2", "127.0.0.3")
	mumbai := startTarget(t, "127.0.0.2", port)
	startTarget(t, "127.0.0.3", port)
	n := startNode(t, map[string]string{"steer.yaml": dashConfig(port, 30), "example.com.zone": dashZone}, Options{})
	const shop = "shop.example.com."
	dnstest.WaitFor(t, 5*time.Second, "both checked pools up", func() bool {
		ov := overview(t, n, "q=shop")
		m, f := poolOf(ov, shop, "mumbai"), poolOf(ov, shop, "frankfurt")
		return m != nil && f != nil && m.TargetsUp == 1 && f.TargetsUp == 1 && m.State == "up" && f.State == "up"
	})
	ov := overview(t, n, "q=SHOP")
	if ov.Total != 1 || len(ov.Records) != 1 || ov.Records[0].TTL != 1 || ov.Records[0].Type != "A" {
		t.Fatalf("filtered overview: %+v", ov)
	}
	want := map[string]struct{ state, noTraffic string }{
		"mumbai":    {"up", "no queries for the record in 5 minutes"},
		"frankfurt": {"up", "no queries for the record in 5 minutes"},
		"standby":   {"up", "failover standby: frankfurt up"},
		"spare":     {"up", "excluded by policy: no rule selects it"},
		"zero":      {"up", "weight 0"},
		"off":       {"disabled", "disabled"},
		"held":      {"up", "failover standby: frankfurt up"},
	}
	for pool, w := range want {
		p := poolOf(ov, shop, pool)
		if p == nil || p.State != w.state || p.NoTraffic != w.noTraffic {
			t.Errorf("pool %s: %+v, want state %s, no traffic %q", pool, p, w.state, w.noTraffic)
		}
	}
	if p := poolOf(ov, shop, "mumbai"); p.Location == nil || p.Location.Lat != 19.08 || p.Since.IsZero() || p.Targets != 1 {
		t.Errorf("mumbai: %+v", p)
	}
	if ov.States["disabled"] != 1 || ov.States["up"] != 6+60 {
		t.Errorf("states %v, want 66 up and 1 disabled", ov.States)
	}
	var nodes, pools int
	for _, pt := range ov.Map {
		switch pt.Kind {
		case "node":
			nodes++
			if pt.Label != "n1" || pt.Lat != 52.52 {
				t.Errorf("node point %+v", pt)
			}
		case "pool":
			pools++
		}
	}
	if nodes != 1 || pools != 2 {
		t.Errorf("map %+v: want the node and 2 pool points", ov.Map)
	}

	// Paging: records sorted by name, Total all of them.
	page := overview(t, n, "offset=10&limit=5")
	if page.Total != 31 || len(page.Records) != 5 || page.Records[0].Name != "f0010.example.com." || page.Records[0].Policy != "pair" {
		t.Fatalf("page 10+5: total %d, %d records, first %+v", page.Total, len(page.Records), page.Records)
	}
	if last := overview(t, n, "offset=30&limit=5"); len(last.Records) != 1 || last.Records[0].Name != shop {
		t.Fatalf("last page: %+v", last.Records)
	}
	if code, body := n.call("GET", "/v1/overview?limit=0x", "", ""); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("bad limit: %d %s", code, body)
	}
	if none := overview(t, n, "state=down"); none.Total != 0 {
		t.Errorf("state=down with none down: %d records", none.Total)
	}

	// A target stops: its pool turns down with the check's reason within
	// 2 s, and an event says so first.
	events := openEvents(t, n.APIAddr())
	stopped := time.Now()
	mumbai.stop()
	select {
	case <-events:
	case <-time.After(2 * time.Second):
		t.Fatal("no event within 2 s of a target going down")
	}
	dnstest.WaitFor(t, 2*time.Second, "mumbai down in the overview", func() bool {
		p := poolOf(overview(t, n, "q=shop"), shop, "mumbai")
		return p != nil && p.State == "down"
	})
	down := overview(t, n, "state=down")
	p := poolOf(down, shop, "mumbai")
	if down.Total != 1 || p == nil || !strings.HasPrefix(p.NoTraffic, "down: 127.0.0.2: ") || !strings.Contains(p.Reason, "0 of 1 up") || p.TargetsUp != 0 {
		t.Fatalf("down: total %d, mumbai %+v", down.Total, p)
	}
	if p.Since.Before(stopped.Add(-time.Second)) {
		t.Errorf("since %v, before the target stopped (%v)", p.Since, stopped)
	}
	t.Logf("down after stop: %v; reason %q", time.Since(stopped), p.Reason)

	// A drain: "drain", not safe while an answer named the pool within the
	// TTL, safe after.
	if got := n.a("shop.example.com"); got != "127.0.0.3" {
		t.Fatalf("answer %s, want frankfurt", got)
	}
	n.Traffic().Sample(time.Now())
	ov = overview(t, n, "q=shop")
	if f := poolOf(ov, shop, "frankfurt"); f.Answers5m != 1 || f.Share5m != 1 || f.Share1h != 1 || f.NoTraffic != "" || ov.Records[0].Answers5m != 1 {
		t.Errorf("frankfurt after one answer: %+v", f)
	}
	if s := poolOf(ov, shop, "standby"); s.NoTraffic != "failover standby: frankfurt up" {
		t.Errorf("standby: %q", s.NoTraffic)
	}
	if code, body := n.call("PUT", "/v1/records/shop.example.com/pools/frankfurt/state", "", `{"state":"drain"}`); code != 204 {
		t.Fatalf("drain: %d %s", code, body)
	}
	select {
	case <-events:
	case <-time.After(2 * time.Second):
		t.Fatal("no event within 2 s of a drain")
	}
	f := poolOf(overview(t, n, "q=shop"), shop, "frankfurt")
	if f.State != "drain" || f.DrainSafe == nil || *f.DrainSafe || !f.Override || f.NoTraffic != "" {
		t.Fatalf("drained frankfurt right after an answer: %+v", f)
	}
	dnstest.WaitFor(t, 5*time.Second, "the drain safe", func() bool {
		f := poolOf(overview(t, n, "q=shop"), shop, "frankfurt")
		return f.DrainSafe != nil && *f.DrainSafe
	})
	if s := poolOf(overview(t, n, "q=shop"), shop, "standby"); s.NoTraffic != "not chosen by any client seen" {
		t.Errorf("standby with frankfurt drained: %q", s.NoTraffic)
	}
}

// openEvents reads GET /v1/events and sends on the channel per event.
func openEvents(t *testing.T, addr string) <-chan api.Event {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/events")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan api.Event, 100)
	opened := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l := sc.Text()
			if l == ": open" {
				close(opened)
			}
			if data, ok := strings.CutPrefix(l, "data: "); ok {
				var ev api.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					ch <- ev
				}
			}
		}
	}()
	select {
	case <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream did not open")
	}
	// Drain what came before (the stream may start after a change).
	for {
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			return ch
		}
	}
}

// TestNoTrafficReasons: the reason for a pool that is up, named and has
// queries, but none for it.
func TestNoTrafficReasons(t *testing.T) {
	r := &policy.Record{Name: "x.", Pools: []*policy.Pool{{PoolSpec: &policy.PoolSpec{Name: "a"}}}, Enabled: 1}
	role := poolRole{named: true}
	for _, c := range []struct {
		state, reason string
		role          poolRole
		answers       uint64
		want          string
	}{
		{"down", "HTTP 503", role, 5, "down: HTTP 503"},
		{"drain", "", role, 5, "drained"},
		{"disabled", "", role, 5, "disabled"},
		{"up", "", poolRole{}, 5, "excluded by policy: no rule selects it"},
		{"up", "", poolRole{named: true, onlyWeight0: true}, 5, "weight 0"},
		{"up", "", role, 0, "no queries for the record in 5 minutes"},
		{"up", "", role, 5, "not chosen by any client seen"},
	} {
		if got := noTraffic(r, r.Pools[0], c.state, c.reason, c.role, nil, c.answers); got != c.want {
			t.Errorf("%+v: %q, want %q", c, got, c.want)
		}
	}
}

// TestRecordDetail: the record page's data for a real node: the config
// text with its line, the rules and trees as written, the pools.
func TestRecordDetail(t *testing.T) {
	port := dnstest.FreePort(t, "127.0.0.2", "127.0.0.3")
	startTarget(t, "127.0.0.2", port)
	startTarget(t, "127.0.0.3", port)
	n := startNode(t, map[string]string{"steer.yaml": dashConfig(port, 2), "example.com.zone": dashZone}, Options{})
	for range 3 { // with an ECS subnet: the answers' scopes are counted
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.0").To4()})
		m.Extra = append(m.Extra, o)
		if r := dnstest.Exchange(t, "udp", n.dns, m); len(r.Answer) != 1 {
			t.Fatalf("answer %v", r)
		}
	}
	n.Traffic().Sample(time.Now())
	code, body := n.call("GET", "/v1/records/shop.example.com", "", "")
	if code != 200 {
		t.Fatalf("record: %d %s", code, body)
	}
	var d api.RecordDetail
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if d.ConfigLine != 14 || !strings.HasPrefix(d.Config, "  - name: shop.example.com\n") || !strings.Contains(d.Config, "default: { failover: [frankfurt, standby, held] }") ||
		strings.Contains(d.Config, "f0000") || !strings.HasSuffix(d.ConfigFile, "steer.yaml") {
		t.Errorf("config at line %d of %s:\n%s", d.ConfigLine, d.ConfigFile, d.Config)
	}
	rules := fmt.Sprint(d.Rules)
	if len(d.Rules) != 2 || d.Rules[0].Match != "country IN, LK" || d.Rules[0].Action != "weighted mumbai:3 zero:0" ||
		d.Rules[1].Match != "default" || d.Rules[1].Action != "failover frankfurt → standby → held" || d.Rules[1].Index != 2 {
		t.Errorf("rules %s", rules)
	}
	if r := d.Rules[1]; r.Decisions5m != 3 || r.Share5m != 1 || d.Rules[0].Decisions1h != 0 {
		t.Errorf("decisions: %s", rules)
	}
	if len(d.Scopes) != 1 || d.Scopes[0].Family != "ipv4" || len(d.Scopes[0].Lengths) != 1 || fmt.Sprint(d.Scopes[0].Counts) != "[3]" {
		t.Errorf("scopes %+v", d.Scopes)
	}
	if len(d.Pools) != 7 {
		t.Errorf("pools %+v", d.Pools)
	}
	// A record of a named policy shows the policy's text too.
	_, body = n.call("GET", "/v1/records/f0001.example.com.", "", "")
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Config, "policy: pair") || !strings.Contains(d.Config, "# policies.pair (line 10)") || !strings.Contains(d.Config, "failover: [one, two]") ||
		d.Rules[0].Action != "failover one → two" || d.Policy != "pair" {
		t.Errorf("policy record: %s\n%+v", d.Config, d.Rules)
	}
	if code, _ := n.call("GET", "/v1/records/nope.example.com", "", ""); code != 404 {
		t.Errorf("unknown record: %d", code)
	}
	// A reload is an event too.
	events := openEvents(t, n.APIAddr())
	if code, body := n.call("POST", "/v1/reload", "", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	for deadline := time.After(2 * time.Second); ; {
		select {
		case ev := <-events:
			if ev.Kind != "reload" {
				continue
			}
		case <-deadline:
			t.Fatal("no reload event within 2 s")
		}
		break
	}
}

// TestRecordLatency: a latency rule's record page ranks its sites for the
// latency map's networks, measured ones by RTT.
func TestRecordLatency(t *testing.T) {
	n := startNode(t, map[string]string{
		"steer.yaml": latencyCfg, "token": "tok", "example.com.zone": zone("example.com", 1, "x"), "feed.json": `{}`,
	}, Options{})
	at := time.Now().UTC().Format(time.RFC3339)
	push := `[{"key":"192.0.2.0/24","site":"bom","rtt_ms":100,"samples":5,"measured_at":"` + at + `"},` +
		`{"key":"192.0.2.0/24","site":"fra","rtt_ms":50,"samples":5,"measured_at":"` + at + `"},` +
		`{"key":"198.51.100.0/24","site":"bom","rtt_ms":20,"samples":5,"measured_at":"` + at + `"}]`
	if code, body := n.call("POST", "/v1/latency", "tok", push); code/100 != 2 {
		t.Fatalf("push: %d %s", code, body)
	}
	code, body := n.call("GET", "/v1/records/shop.example.com", "tok", "")
	var d api.RecordDetail
	if code != 200 || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("record: %d %s", code, body)
	}
	got := fmt.Sprint(d.Latency)
	if len(d.Latency) != 2 || d.Latency[0].Network != "192.0.2.0/24" || fmt.Sprint(d.Latency[0].Sites) != "[fra 50ms bom 100ms]" ||
		d.Latency[1].Network != "198.51.100.0/24" || d.Latency[1].Sites[0] != "bom 20ms" || d.Rules[0].Action != "latency over bom, fra" {
		t.Errorf("latency excerpts %s; rules %+v", got, d.Rules)
	}
}

// TestPoolGeoLocation: a pool without a location is drawn where the City
// database places its first address; one it does not place has none.
func TestPoolGeoLocation(t *testing.T) {
	db, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, map[string]string{"steer.yaml": `api: { listen: "127.0.0.1:0" }
geo: { databases: ["` + db + `"] }
zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: www.example.com
    pools:
      mumbai: { address: 192.0.2.20 }
      nowhere: { address: 10.9.9.9 }
      set: { address: 192.0.2.21, location: { lat: 1, lon: 2 } }
    rules:
      - default: { pool: mumbai }
`, "example.com.zone": dashZone}, Options{})
	ov := overview(t, n, "")
	m, x, s := poolOf(ov, "www.example.com.", "mumbai"), poolOf(ov, "www.example.com.", "nowhere"), poolOf(ov, "www.example.com.", "set")
	if m == nil || m.Location == nil || m.Location.Lat != 19.076 || m.Location.Lon != 72.8777 {
		t.Errorf("mumbai: %+v", m)
	}
	if x == nil || x.Location != nil || s == nil || s.Location == nil || s.Location.Lat != 1 {
		t.Errorf("nowhere %+v, set %+v", x, s)
	}
	if len(ov.Map) != 2 {
		t.Errorf("map %+v: want mumbai's and set's points (the node has no location)", ov.Map)
	}
}

// TestSubscribe: a subscriber gets a change, a slow one loses none but
// the latest (one value pending), and the end of its context or its
// cancel ends the subscription.
func TestSubscribe(t *testing.T) {
	n := &Node{}
	b := &backend{n: n}
	ctx, cancel := context.WithCancel(context.Background())
	ch, stop := b.Subscribe(ctx)
	defer stop()
	n.dash.notify("health")
	n.dash.notify("reload") // dropped: one is pending
	if ev := <-ch; ev.Kind != "health" || ev.At.IsZero() {
		t.Fatalf("event %+v", ev)
	}
	select {
	case ev := <-ch:
		t.Fatalf("a second pending event %+v", ev)
	default:
	}
	subs := func() int {
		n.dash.mu.Lock()
		defer n.dash.mu.Unlock()
		return len(n.dash.subs)
	}
	_, stop2 := b.Subscribe(context.Background())
	if subs() != 2 {
		t.Fatalf("%d subscribers, want 2", subs())
	}
	cancel()
	dnstest.WaitFor(t, 2*time.Second, "the cancelled context's subscription to end", func() bool { return subs() == 1 })
	stop2()
	stop2()
	if subs() != 0 {
		t.Fatalf("%d subscribers after both ended", subs())
	}
}

// TestConfigBlock: a record's YAML block ends before the next line as
// shallow as its first, keeps its own blank lines and drops trailing
// ones, and reads to the end of a text without a final newline.
func TestConfigBlock(t *testing.T) {
	text := "records:\n  - name: a\n    ttl: 5\n\n    pools: x\n\n  - name: b\n    ttl: 6"
	for _, c := range []struct {
		line int
		want string
	}{
		{2, "  - name: a\n    ttl: 5\n\n    pools: x\n"},
		{7, "  - name: b\n    ttl: 6\n"},
		{3, "    ttl: 5\n"},
		{0, ""},
		{99, ""},
	} {
		if got := block(text, c.line); got != c.want {
			t.Errorf("block at line %d = %q, want %q", c.line, got, c.want)
		}
	}
}
