package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/fleet"
)

// capacityConfig: c.example.com sends 10.0.0.0/11 to pool a (falling over
// to b) in 32 /16 networks, the rest of the space to c; a declares a
// capacity of 100 (max 200) in its load feed's unit.
func capacityConfig(extra string) string {
	var even, odd []string
	for i := range 32 {
		n := fmt.Sprintf("10.%d.0.0/16", i)
		if i%2 == 0 {
			even = append(even, n)
		} else {
			odd = append(odd, n)
		}
	}
	db, _ := filepath.Abs("../../testdata/geo/larkbook-country-flat.mmdb")
	return `api: { listen: "127.0.0.1:0" }
ecs: { enabled: true }
geo: { databases: ["` + db + `"] }
metrics: { per_record: [c.example.com] }
zones:
  - { origin: example.com, file: example.com.zone }
` + extra + `
records:
  - name: c.example.com
    ttl: 1
    pools:
      a: { address: 192.0.2.1, capacity: { target: 100, max: 200 } }
      b: { address: 192.0.2.2 }
      c: { address: 192.0.2.3 }
    rules:
      - match: { cidr: [` + strings.Join(even, ", ") + `] }
        failover: [a, b]
      - match: { cidr: [` + strings.Join(odd, ", ") + `] }
        failover: [a, b]
      - default: { pool: c }
`
}

// capacityRound asks for c.example.com over ECS from random /24s of each
// /16 of 10.0.0.0/11, weight(k) queries from 10.k.0.0/16 (the offered
// load of each network), 4 at a time; it checks that no answer's ECS
// scope covers a client of the round that got another pool (when
// checkScopes: the shed state does not change during the round), and returns
// how many of the answers named each address.
func capacityRound(t *testing.T, addr netip.AddrPort, rnd *rand.Rand, weight func(k int) int, checkScopes bool) map[string]int {
	t.Helper()
	type ans struct {
		client netip.Prefix
		scope  int
		a      string
	}
	var subnets []netip.Prefix
	for k := range 32 {
		for range weight(k) {
			subnets = append(subnets, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(k), byte(rnd.IntN(256)), 0}), 24))
		}
	}
	n := len(subnets)
	out := make([]ans, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Timeout: 250 * time.Millisecond}
			for i := w; i < n; i += 8 {
				m := new(dns.Msg)
				m.SetQuestion("c.example.com.", dns.TypeA)
				o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
				o.SetUDPSize(1232)
				o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: subnets[i].Addr().AsSlice()})
				m.Extra = append(m.Extra, o)
				r, _, err := c.Exchange(m, addr.String())
				if err != nil || len(r.Answer) == 0 {
					continue // a dropped UDP query on a loaded machine
				}
				out[i] = ans{client: subnets[i], a: r.Answer[0].(*dns.A).A.String(), scope: -1}
				if opt := r.IsEdns0(); opt != nil {
					for _, e := range opt.Option {
						if s, ok := e.(*dns.EDNS0_SUBNET); ok {
							out[i].scope = int(s.SourceScope)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	counts := map[string]int{}
	byScope := map[netip.Prefix]string{}
	for _, a := range out {
		if a.a == "" {
			continue
		}
		counts[a.a]++
		if a.scope < 0 || a.scope > 24 {
			t.Errorf("%s: scope %d, want 0..24", a.client, a.scope)
			continue
		}
		byScope[netip.PrefixFrom(a.client.Addr(), a.scope).Masked()] = a.a
	}
	for _, a := range out {
		if a.a == "" || !checkScopes {
			continue
		}
		for l := 0; l <= 24; l++ {
			if got, ok := byScope[netip.PrefixFrom(a.client.Addr(), l).Masked()]; ok && got != a.a {
				t.Errorf("an answer %s with scope /%d covers %s, which got %s", got, l, a.client, a.a)
			}
		}
	}
	return counts
}

// TestCapacityLoadInput: PUT /v1/load refuses bad items naming them and
// applies nothing; a load file is watched and applied.
func TestCapacityLoadInput(t *testing.T) {
	t.Parallel()
	n := startNode(t, map[string]string{
		"steer.yaml":       capacityConfig("load: { files: [load.json] }"),
		"example.com.zone": dashZone,
	}, Options{})
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"loads": [{"record": "c.example.com", "pool": "zz", "current-load": 5}]}`, 404, `loads[0]: record c.example.com has no pool "zz"`},
		{`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": 5}, {"record": "nope.example.com", "pool": "a", "current-load": 5}]}`, 404, `loads[1]: no steered record "nope.example.com"`},
		{`{"loads": [{"record": "c.example.com", "pool": "b", "current-load": 5}]}`, 404, `loads[0]: pool b of c.example.com declares no capacity`},
		{`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": -1}]}`, 400, `loads[0]: current-load -1 is not a number`},
		{`{"loads": [{"record": "c.example.com", "pool": "a"}]}`, 400, `loads[0]: current-load is required`},
		{`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": 5, "timestamp": "yesterday"}]}`, 400, `loads[0]: timestamp "yesterday" is not RFC 3339`},
		{`{"loads": [{"record": "c.example.com", "pool": "a", "current_load": 5}]}`, 400, `loads[0]: json: unknown field "current_load"`},
		{`{"loads": [`, 400, `not a JSON object`},
	} {
		code, body := n.call("PUT", "/v1/load", "", c.body)
		var e struct{ Error string }
		json.Unmarshal([]byte(body), &e)
		if code != c.code || !strings.Contains(e.Error, c.want) {
			t.Errorf("PUT %s: %d %s, want %d naming %q", c.body, code, body, c.code, c.want)
		}
	}
	loadState := func() api.PoolLoad {
		code, body := n.call("GET", "/v1/load", "", "")
		var st api.LoadStatus
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Pools) != 1 {
			t.Fatalf("GET /v1/load: %d %s", code, body)
		}
		return st.Pools[0]
	}
	if p := loadState(); p.State != "no data" {
		t.Errorf("after only bad input the pool has a load: %+v", p)
	}
	capacityRound(t, n.dns, rand.New(rand.NewPCG(1, 1)), func(int) int { return 3 }, true) // traffic to shed
	writeFile(t, n.dir, "load.json", fmt.Sprintf(`[{"record": "c.example.com", "pool": "a", "current-load": 130, "timestamp": %q}]`, time.Now().UTC().Format(time.RFC3339)))
	dnstest.WaitFor(t, 3*time.Second, "the load file to apply", func() bool { return loadState().Load == 130 })
	p := loadState()
	if p.State != "shed" || p.Shed == 0 || p.Percent != 130 {
		t.Fatalf("after a load of 130 %% of target: %+v", p)
	}
	// Metrics: per pool load, share shed, stale.
	rec := httptest.NewRecorder()
	n.met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`steer_capacity_load_ratio{pool="a",record="c.example.com."} 1.3`, `steer_capacity_load_stale{pool="a",record="c.example.com."} 0`,
		`steer_capacity_shed_share{pool="a",record="c.example.com."} 0.`, `steer_capacity_updates_total{result="rejected",source="api"} 8`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepCapacity(rec.Body.String()))
		}
	}
	// Status, the dashboard's overview and explain say why.
	var st api.Status
	if code, body := n.call("GET", "/v1/status", "", ""); code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("status: %d %s", code, body)
	}
	for _, r := range st.Records {
		for _, sp := range r.Pools {
			if r.Name == "c.example.com." && sp.Name == "a" && !strings.HasPrefix(sp.Capacity, "shed: load 130 % of target") {
				t.Errorf("status of pool a: capacity %q", sp.Capacity)
			}
		}
	}
	if ov := overview(t, n, ""); poolOf(ov, "c.example.com.", "a") == nil || !strings.HasPrefix(poolOf(ov, "c.example.com.", "a").Capacity, "shed: load 130 % of target") {
		t.Errorf("overview of pool a: %+v", poolOf(ov, "c.example.com.", "a"))
	}
	shed := 0
	for k := range 32 {
		var rep explain.Report
		code, body := n.call("GET", fmt.Sprintf("/v1/explain?name=c.example.com&ecs=10.%d.1.0/24", k), "", "")
		if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || len(rep.Steer) != 1 {
			t.Fatalf("explain: %d %s", code, body)
		}
		if s := rep.Steer[0].Shed; s != "" {
			shed++
			if want := fmt.Sprintf("network 10.%d.0.0/16 is shed from a to the next candidate of its rule (a: shed: load 130 %% of target", k); !strings.HasPrefix(s, want) ||
				fmt.Sprint(rep.Steer[0].Chosen) != "[b]" {
				t.Errorf("explain 10.%d.1.0/24: shed %q chosen %v, want %q...", k, s, rep.Steer[0].Chosen, want)
			}
		}
	}
	if shed != p.Shed {
		t.Errorf("explain names %d shed networks, the load status %d", shed, p.Shed)
	}
}

// TestCapacityFleetLoad: in a fleet, a load PUT on one node reaches the
// other through the store and sheds there too.
func TestCapacityFleetLoad(t *testing.T) {
	t.Parallel() // waits on the store and the peers
	c, s := fleetStore(t)
	cfg := strings.Replace(capacityConfig(""), `api: { listen: "127.0.0.1:0" }`+"\n", "", 1)
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "example.com.zone": []byte(dashZone)}}
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	var nodes []*testNode
	for _, name := range []string{"a", "b"} {
		nodes = append(nodes, startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), name)}, Options{}))
	}
	// Traffic on b, so that b has networks to shed.
	capacityRound(t, nodes[1].dns, rand.New(rand.NewPCG(2, 2)), func(int) int { return 3 }, true)
	start := time.Now()
	body := fmt.Sprintf(`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": 140, "timestamp": %q}]}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := (&backend{n: nodes[0].Node}).PutLoad(strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	be := &backend{n: nodes[1].Node}
	// Within a second as a rule; 5 s bounds a loaded machine under -race.
	dnstest.WaitFor(t, 5*time.Second, "the load on node b", func() bool {
		st := be.Loads()
		return len(st.Pools) == 1 && st.Pools[0].Load == 140
	})
	t.Logf("a load put on node a reached node b after %s", time.Since(start).Round(time.Millisecond))
	if st := be.Loads(); st.LastSource != "fleet" || st.Pools[0].Shed == 0 {
		t.Errorf("node b: load from %q, %d networks shed; want fleet, some", st.LastSource, st.Pools[0].Shed)
	}
}

// TestCapacityFleetLoadPending: a load put on a node cut off from the
// store is applied there, answered 202 "pending: fleet" and listed in its
// status, GET /v1/load and steer_fleet_loads_pending; a newer one
// replaces it; when the link heals the newer one reaches the store and
// the other node within a bounded time (it was never written before).
func TestCapacityFleetLoadPending(t *testing.T) {
	t.Parallel() // waits on the store and the peers
	c, s := fleetStore(t)
	cfg := strings.Replace(capacityConfig(""), `api: { listen: "127.0.0.1:0" }`+"\n", "", 1)
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "example.com.zone": []byte(dashZone)}}
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	br := etcdtest.NewBridge(t, c.Member(0).Addr())
	cut := startNode(t, map[string]string{"steer.yaml": fleetLocal([]string{"http://" + br.Addr()}, "cut")}, Options{})
	other := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "other")}, Options{})
	h := api.NewHandler(&backend{n: cut.Node}, api.Options{})
	putLoad := func(v int, at time.Time) (int, string) {
		rec := httptest.NewRecorder()
		body := fmt.Sprintf(`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": %d, "timestamp": %q}]}`, v, at.UTC().Format(time.RFC3339Nano))
		h.ServeHTTP(rec, httptest.NewRequest("PUT", "/v1/load", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	br.Cut()
	// Once the node knows it is cut off (its status write failed) it
	// answers at once instead of after the store write's 3 s timeout:
	// wait for that (up to 5 s on a loaded machine, then go on anyway).
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(cut.logs.String(), "the node's status was not written") {
			break
		}
	}
	start := time.Now()
	if code, body := putLoad(140, time.Now()); code != 202 || !strings.Contains(body, `"pending": "fleet"`) {
		t.Fatalf("a load through the cut node: %d %s", code, body)
	}
	t.Logf("answered 202 after %v", time.Since(start).Round(time.Millisecond))
	if code, body := putLoad(150, time.Now()); code != 202 {
		t.Fatalf("a newer load through the cut node: %d %s", code, body)
	}
	be := &backend{n: cut.Node}
	if st := be.Loads(); len(st.Pools) != 1 || st.Pools[0].Load != 150 || len(st.Pending) != 1 || !strings.Contains(st.Pending[0], "load c.example.com./a 150 at") {
		t.Fatalf("the cut node's loads: %+v", st)
	}
	if p := cut.Status().Pending; len(p) != 1 || !strings.Contains(p[0], "fleet: load c.example.com./a 150") {
		t.Errorf("the cut node's status lists as pending: %q", p)
	}
	if m := grepLines(scrape(t, cut), "steer_fleet_loads_pending "); !strings.HasSuffix(m, "\nsteer_fleet_loads_pending 1") {
		t.Errorf("metric: %q", m)
	}
	br.Heal()
	br.Drop()
	healed := time.Now()
	ob := &backend{n: other.Node}
	dnstest.WaitFor(t, 5*time.Second, "the newer load on the other node", func() bool {
		st := ob.Loads()
		return len(st.Pools) == 1 && st.Pools[0].Load == 150
	})
	t.Logf("the load reached the other node %v after the link healed", time.Since(healed).Round(time.Millisecond))
	kvs, _, err := s.Get(context.Background(), "/steer/v1/load/")
	if err != nil || len(kvs) != 1 || !strings.Contains(string(kvs[0].Value), `"current":150`) {
		t.Fatalf("the store's loads: %v %v", kvs, err)
	}
	dnstest.WaitFor(t, 2*time.Second, "nothing pending", func() bool { return len(be.Loads().Pending) == 0 })
	if m := grepLines(scrape(t, cut), "steer_fleet_loads_pending "); !strings.HasSuffix(m, "\nsteer_fleet_loads_pending 0") {
		t.Errorf("metric after the flush: %q", m)
	}
}

func grepCapacity(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "steer_capacity_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
