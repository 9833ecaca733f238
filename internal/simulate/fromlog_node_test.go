package simulate_test

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/querylog"
	"github.com/steer-dns/steer/internal/servertest"
	"github.com/steer-dns/steer/internal/simulate"
	"github.com/steer-dns/steer/internal/snapshot"
)

// fakeResolver is a caching resolver in front of a real steer: its users
// ask at Rate q/s (Poisson) from the ECS sources (by weight; none: no
// ECS), and it asks steer only when its cache has no live entry for the
// block the answer's scope covers, keeping each answer for Life.
type fakeResolver struct {
	addr    string
	sources []string
	weights []float64
	rate    float64

	mu      sync.Mutex
	expires map[netip.Prefix]time.Time // block → expiry
	scopes  map[netip.Prefix]int       // source → scope last returned
	misses  map[netip.Prefix]int       // block → queries sent
	failed  int
}

func (f *fakeResolver) run(t *testing.T, server netip.AddrPort, life, run time.Duration, seed uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 2))
	c := &dns.Client{Net: "udp", Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(f.addr)}}}
	start := time.Now()
	at := start
	for {
		at = at.Add(time.Duration(rng.ExpFloat64() / f.rate * float64(time.Second)))
		if at.Sub(start) >= run {
			return
		}
		time.Sleep(time.Until(at)) // an absolute schedule: the rate holds when a sleep overshoots
		now := time.Now()
		var src netip.Prefix
		if len(f.sources) > 0 {
			u, i := rng.Float64(), 0
			for ; i < len(f.weights)-1 && u >= f.weights[i]; i++ {
				u -= f.weights[i]
			}
			src = netip.MustParsePrefix(f.sources[i])
		}
		// The block this source's last answer covered: a live entry
		// there answers the user.
		block := src
		if s, ok := f.scopes[src]; ok && src.IsValid() {
			block, _ = src.Addr().Prefix(min(s, src.Bits()))
		}
		if exp, ok := f.expires[block]; ok && now.Before(exp) {
			continue
		}
		m := dnstest.Query("shop.example.com.", dns.TypeA)
		m.RecursionDesired = false
		if src.IsValid() {
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.SetUDPSize(1232)
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(src.Bits()), Address: src.Addr().AsSlice()})
			m.Extra = append(m.Extra, o)
		}
		r, _, err := c.Exchange(m, server.String())
		if err != nil || r == nil {
			f.failed++
			continue
		}
		if src.IsValid() {
			scope := -1
			if opt := r.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if s, ok := o.(*dns.EDNS0_SUBNET); ok {
						scope = int(s.SourceScope)
					}
				}
			}
			if scope < 0 {
				t.Errorf("%s: no ECS scope in the answer for %s", f.addr, src)
				return
			}
			f.scopes[src] = scope
			block, _ = src.Addr().Prefix(min(scope, src.Bits()))
		}
		f.mu.Lock()
		f.misses[block]++
		f.mu.Unlock()
		f.expires[block] = time.Now().Add(life)
	}
}

// TestFromLogRealNode: fake caching resolvers with known user rates ask a
// real steer (in process, its real query log) for 3 s; FromLog finds
// their cache keys as the resolvers kept them and their users' rates
// within a factor of 2 (about 30 misses a key: ±18 % is one standard
// error).
func TestFromLogRealNode(t *testing.T) {
	zone, err := os.ReadFile(filepath.Join("..", "..", "examples", "larkbook", "zones", "example.com.zone"))
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Start(t, map[string]string{
		"steer.yaml": `listen: ["127.0.0.1:0"]
zones:
  - { origin: example.com, file: example.com.zone }
geo: { databases: [embedded] }
ecs: { enabled: true, max_source_v4: 24, max_source_v6: 56 }
records:
` + dnstest.LarkbookRecord(),
		"example.com.zone": string(zone),
	})
	logPath := filepath.Join(t.TempDir(), "query.log")
	ql, err := querylog.Open(querylog.Options{Path: logPath, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handler().SetQueryLog(ql)

	// Each cache keeps an answer 50 ms (a clamp far below the record's
	// 60 s, so that 3 s hold ~60 cache lifetimes); each key's users ask
	// at 20 q/s: λT = 1, m = 10 misses/s.
	const life = 50 * time.Millisecond
	const run = 3 * time.Second
	resolvers := []*fakeResolver{
		// Two German /24s (one block: steer's scope there is wider than
		// /23) and an Indian one.
		{addr: "127.0.0.2", sources: []string{"91.64.1.0/24", "91.64.2.0/24", "49.36.0.0/24"}, weights: []float64{0.25, 0.25, 0.5}, rate: 40},
		{addr: "127.0.0.3", rate: 20},
	}
	var wg sync.WaitGroup
	for i, r := range resolvers {
		r.expires, r.scopes, r.misses = map[netip.Prefix]time.Time{}, map[netip.Prefix]int{}, map[netip.Prefix]int{}
		wg.Add(1)
		go r.run(t, srv.V4, life, run, uint64(i+1), &wg)
	}
	wg.Wait()
	srv.Handler().SetQueryLog(nil)
	if err := ql.Close(); err != nil {
		t.Fatal(err)
	}
	if d := ql.Dropped(); d != 0 {
		t.Fatalf("the query log dropped %d entries", d)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, rep, err := simulate.FromLog(f, simulate.FromLogOptions{TTL: life})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", rep.Text(), simulate.FromLogYAML(sc, rep))

	// The keys are the fake resolvers' own cache entries, with their
	// misses (a miss the log lacks is one steer did not answer).
	type key struct{ res, block string }
	want := map[key]float64{}
	for _, r := range resolvers {
		if r.failed > 2 {
			t.Fatalf("%s: %d queries unanswered", r.addr, r.failed)
		}
		for b, n := range r.misses {
			k := key{r.addr, ""}
			if b.IsValid() {
				k.block = b.String()
			}
			want[k] = 20
			t.Logf("%s %s: %d misses sent", r.addr, k.block, n)
		}
	}
	if len(want) != 3 {
		t.Fatalf("the fake resolvers kept %d cache keys, want 3 (is steer's scope for 91.64.1.0/24 narrower than /23?): %v", len(want), want)
	}
	if len(rep.Keys) != len(want) {
		t.Errorf("%d keys inferred, the resolvers kept %d", len(rep.Keys), len(want))
	}
	for _, k := range rep.Keys {
		kk := key{k.Resolver.String(), ""}
		if k.Block.IsValid() {
			kk.block = k.Block.String()
		}
		lambda, ok := want[kk]
		if !ok {
			t.Errorf("key %v was not a cache entry of the resolvers", kk)
			continue
		}
		if k.Rate < lambda/2 || k.Rate > lambda*2 || k.Caches != 1 || k.Saturated {
			t.Errorf("key %v: λ̂ %.3g (want %g within a factor of 2), %d caches, saturated %t", kk, k.Rate, lambda, k.Caches, k.Saturated)
		}
	}
	// Two sites in 127.0.0.0/24, told apart by their behaviour.
	names := map[string]simulate.ResolverSite{}
	for _, s := range sc.Resolvers {
		names[s.Name] = s
	}
	if s, ok := names["res-127.0.0.0-24-ecs24"]; !ok || s.Address != "127.0.0.2" || s.ECS == nil || s.ECS.V4 != 24 {
		t.Errorf("the ECS site: %+v (sites %v)", s, names)
	}
	if s, ok := names["res-127.0.0.0-24-noecs"]; !ok || s.Address != "127.0.0.3" || s.ECS != nil {
		t.Errorf("the site without ECS: %+v (sites %v)", s, names)
	}
	total := 0.0
	for _, g := range sc.Clients {
		total += g.Rate
	}
	if math.Abs(total-rep.UserRate) > 1e-5*total || total < 30 || total > 120 {
		t.Errorf("users %.3g q/s (report %.3g), want about 60", total, rep.UserRate)
	}
	if text := rep.Text(); !strings.Contains(text, "1 resolver sends no ECS") {
		t.Errorf("the report does not say one resolver sends no ECS:\n%s", text)
	}

	// The population, run by the engine against the node's own
	// configuration (the resolvers' caches clamped to 50 ms as the fake
	// ones were), sends steer the misses the log showed, per site: the
	// ECS scopes the engine's decisions return are the node's.
	cfg, err := config.Load(srv.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Resolvers {
		sc.Resolvers[i].TTL = &simulate.TTLClamp{Max: simulate.Duration(life)}
	}
	sc.Runs = 4
	model, err := simulate.Compile(sc, simulate.Base{Config: cfg, Geo: snap.Geo, Table: snap.Policies})
	if err != nil {
		t.Fatal(err)
	}
	res, err := simulate.Run(context.Background(), model, simulate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	observed := map[string]float64{}
	for _, k := range rep.Keys {
		observed[k.Site] += k.MissRate
	}
	for _, c := range res.Cost {
		want := observed[c.Site]
		t.Logf("%-24s simulated %.3g misses/s, the log %.3g (%+.0f %%)", c.Site, c.AuthQPS, want, 100*(c.AuthQPS/want-1))
		if math.Abs(c.AuthQPS-want) > 0.15*want {
			t.Errorf("site %s: simulated %.3g misses/s, the log %.3g", c.Site, c.AuthQPS, want)
		}
	}
}
