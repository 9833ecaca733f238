//go:build !race

package node

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/rum"
)

// The timescale. A RUM round stands for one rum.interval at its default
// (30 s) and lasts rumTestInterval here; the beacons' half-life is
// scaled by the same factor (10 min becomes 1 s), so that a round weighs
// at most the share of what users measured it weighs in production (a
// loaded machine stretches the test's rounds, and the aggregates then
// forget faster: noisier than in production, which makes flapping more
// likely, not less). Anti-flap counts rounds (updates), not seconds, and
// the latency map's values are replaced each round (half_life 0s): a
// round is the unit everything that could make the answers flap moves
// by, and an hour is 120 rounds. min_samples is 0 so that a round a
// loaded machine delays still feeds every cell that changed.
const (
	rumTestInterval = 50 * time.Millisecond
	rumRealInterval = 30 * time.Second
)

const rumAcceptanceCfg = `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
geo: { databases: [%s] }
latency: { half_life: 0s, max_age: 1h, switch_margin: 0.2, switch_rounds: 3 }
rum: { listen: "127.0.0.1:0", token_file: rumtoken, interval: %s, half_life: 1s, min_samples: 0, max_batch_beacons: 20000, max_batch_bytes: 2000000 }
zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: www.example.com
    ttl: 60
    pools:
      fra: { address: 198.51.100.1, location: { lat: 50.11, lon: 8.68 } }
      iad: { address: 198.51.100.2, location: { lat: 38.95, lon: -77.45 } }
      sin: { address: 198.51.100.3, location: { lat: 1.35, lon: 103.82 } }
    rules:
      - default: { by: latency, fallback: [fra, iad, sin] }
`

// rumAnswer is the site one ECS query was answered with, and its scope.
type rumAnswer struct {
	site  int
	scope int
}

// TestRUMSteersByWhatUsersMeasure is issue 30's acceptance test for
// real-user measurements. A population of 1,000 networks in 10
// countries, RTTs to three sites from a known model, 10 % of the
// networks placed by the geo database at a VPN egress on another
// continent; a real node steering by latency; beacons drawn from the
// model posted through the real beacon listener. It checks that at
// least 95 % of the networks are then steered to the site their users
// measured best (against about 90 % by geography alone, measured first),
// that steer rum report's data (GET /v1/rum/report) lists the misplaced
// networks, that networks with two sites within 5 % switch less than
// once an hour, and that every answer's ECS scope is exact.
func TestRUMSteersByWhatUsersMeasure(t *testing.T) {
	t.Parallel()
	start := time.Now()
	pop := newRUMPopulation(30, 100)
	dir := t.TempDir()
	db := filepath.Join(dir, "pop.mmdb")
	pop.writeMMDB(t, db)
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(rumAcceptanceCfg, db, rumTestInterval))
	writeFile(t, dir, "token", "tok")
	writeFile(t, dir, "rumtoken", "beacon-key")
	writeFile(t, dir, "example.com.zone", zone("example.com", 1, "x"))
	n := startNodeIn(t, dir, Options{})
	t.Logf("the node started %v in", time.Since(start).Round(time.Millisecond))
	rnd := rand.New(rand.NewPCG(30, 31))
	all := make([]int, len(pop.nets))
	for i := range all {
		all[i] = i
	}

	// Geography alone: the latency map's estimate from where the
	// database places each network.
	phase := time.Now()
	geoAns := n.rumAnswers(pop, all)
	checkRUMScopes(t, n, pop, geoAns, "geography alone", rnd)
	t.Logf("geography alone: asking took %v", time.Since(phase).Round(time.Millisecond))

	// Ingestion: two rounds of beacons from every network to every site.
	samples := make([][3][]float64, len(pop.nets))
	phase = time.Now()
	for round, k := range []int{6, 3} {
		before := n.rumRounds()
		n.postRUMRound(pop, all, k, rnd, samples)
		n.waitRUMRound(before, fmt.Sprintf("ingestion round %d", round+1))
	}
	t.Logf("ingestion took %v", time.Since(phase).Round(time.Millisecond))
	ans := n.rumAnswers(pop, all)
	checkRUMScopes(t, n, pop, ans, "after ingestion", rnd)
	// The measured best: the lowest median of every beacon sent.
	measured := make([]int, len(pop.nets))
	geoRight, rumRight := 0, 0
	for i := range pop.nets {
		best := 0
		for s := 1; s < 3; s++ {
			if median(samples[i][s]) < median(samples[i][best]) {
				best = s
			}
		}
		measured[i] = best
		if geoAns[i].site == best {
			geoRight++
		}
		if ans[i].site == best {
			rumRight++
		}
	}
	total := len(pop.nets)
	t.Logf("steered to their measured best: %d of %d by geography alone (%.1f %%), %d after ingestion (%.1f %%)",
		geoRight, total, 100*float64(geoRight)/float64(total), rumRight, 100*float64(rumRight)/float64(total))
	if rumRight*100 < 95*total {
		t.Errorf("after ingestion %d of %d networks are steered to their measured best, want at least 95 %%", rumRight, total)
	}
	if geoRight*100 > 93*total || geoRight*100 < 85*total {
		t.Errorf("geography alone steers %d of %d networks to their measured best: the model is not the issue's (about 90 %%)", geoRight, total)
	}

	// The report lists the misplaced networks, with the beacons behind
	// each.
	// Counts decay by wall time, 600 times faster here than in
	// production (see rumTestInterval), and a loaded machine can take
	// seconds over the ingestion: every cell takes part, whatever is
	// left of its count (the findings' totals say how many beacons).
	code, body := n.call("GET", "/v1/rum/report?min_count=1e-9", "tok", "")
	var rep rum.Report
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("GET /v1/rum/report: %d %s", code, body)
	}
	if rep.Record != "www.example.com." || rep.Blocks != total || len(rep.Countries) != len(rumCountries) || len(rep.Sites) != 3 {
		t.Errorf("report of %s: %d networks, %d countries, %d sites; want www.example.com., %d, %d, 3", rep.Record, rep.Blocks,
			len(rep.Countries), len(rep.Sites), total, len(rumCountries))
	}
	for q, want := range map[string]int{"name=shop.example.com": 404, "country_factor=0.5": 400, "name=www.example.com&min_count=x": 400} {
		if code, body := n.call("GET", "/v1/rum/report?"+q, "tok", ""); code != want {
			t.Errorf("GET /v1/rum/report?%s: %d %s, want %d", q, code, body, want)
		}
	}
	listed := map[netip.Prefix]rum.NetworkFinding{}
	for _, f := range rep.Misplaced {
		listed[netip.MustParsePrefix(f.Block)] = f
	}
	misplaced, clear, found, clearFound, wrong := 0, 0, 0, 0, 0
	for i, nt := range pop.nets {
		f, ok := listed[nt.block]
		if !nt.mislocated {
			if ok {
				wrong++
				t.Logf("listed but placed right: %+v (model %v)", f, nt.rtt)
			}
			continue
		}
		misplaced++
		// Where the database puts it, geography picks this site; the
		// users measure theirs. Clear: more than the margin (20 %) and
		// the noise of a dozen beacons' p75 (10 %) apart.
		g, b := nt.geoChoice(), measured[i]
		isClear := nt.rtt[b] <= 0.7*nt.rtt[g]
		if isClear {
			clear++
		}
		if ok {
			found++
			if isClear {
				clearFound++
			}
			if !(f.Count > 0) || f.Total < 9 || f.Country != rumCountries[nt.geoCountry].code {
				t.Errorf("finding %+v: want the country the database says (%s) and the beacons behind it", f, rumCountries[nt.geoCountry].code)
			}
		} else if isClear {
			t.Errorf("%s (users in %s, placed in %s; model %v) is not listed as misplaced", nt.block, rumCountries[nt.country].code,
				rumCountries[nt.geoCountry].code, nt.rtt)
		}
	}
	t.Logf("report: %d networks listed misplaced: %d of the %d mislocated (all %d whose users' best beats geography's by 30 %%: %d), %d placed right",
		len(rep.Misplaced), found, misplaced, clear, clearFound, wrong)
	if wrong > total/100 {
		t.Errorf("%d networks placed right are listed as misplaced, want at most 1 %%", wrong)
	}
	if clear < misplaced*3/4 {
		t.Errorf("only %d of %d mislocated networks are clearly misrouted by geography: the model is too weak to test the report", clear, misplaced)
	}
	if len(rep.OffBest) > total/20 {
		t.Errorf("%d networks steered off their measured best after ingestion", len(rep.OffBest))
	}
	for _, c := range rep.FarAbove {
		t.Logf("far above its neighbours: %+v", c)
	}

	t.Logf("the report is read %v in", time.Since(start).Round(time.Millisecond))
	// Flapping: the networks whose two best sites are within 5 % of each
	// other, fed round after round with fresh noisy beacons.
	var ties []int
	for i := range pop.nets {
		if _, m := pop.nets[i].best(); m < 0.05 {
			ties = append(ties, i)
		}
	}
	if len(ties) < 20 {
		t.Fatalf("only %d networks have two sites within 5 %%", len(ties))
	}
	const rounds = 40
	phase = time.Now()
	prev := make([]int, len(ties))
	for j, i := range ties {
		prev[j] = ans[i].site
	}
	switches, rawFlips := 0, 0
	rawPrev := make([]int, len(ties))
	for round := range rounds {
		fresh := make([][3][]float64, len(pop.nets))
		before := n.rumRounds()
		n.postRUMRound(pop, ties, 4, rnd, fresh)
		n.waitRUMRound(before, fmt.Sprintf("flapping round %d", round+1))
		got := n.rumAnswers(pop, ties)
		for j, i := range ties {
			if got[j].site != prev[j] {
				switches++
				prev[j] = got[j].site
			}
			if got[j].scope > 24 || got[j].scope < 0 {
				t.Errorf("round %d: %s scope /%d", round+1, pop.nets[i].block, got[j].scope)
			}
			// What a choice of this round's beacons alone would do.
			raw := 0
			for s := 1; s < 3; s++ {
				if median(fresh[i][s]) < median(fresh[i][raw]) {
					raw = s
				}
			}
			if round > 0 && raw != rawPrev[j] {
				rawFlips++
			}
			rawPrev[j] = raw
		}
	}
	t.Logf("flapping rounds took %v", time.Since(phase).Round(time.Millisecond))
	hours := float64(rounds) * rumRealInterval.Hours()
	rate := float64(switches) / float64(len(ties)) / hours
	t.Logf("near ties: %d networks, %d rounds (%.1f h at rum.interval %v): %d switches, %.2f per network per hour; the rounds' own best flipped %d times",
		len(ties), rounds, hours, rumRealInterval, switches, rate, rawFlips)
	if rate >= 1 {
		t.Errorf("near ties switch %.2f times per network per hour, want below 1", rate)
	}
	if rawFlips < len(ties) {
		t.Errorf("the rounds' own best flipped only %d times over %d networks: the noise does not test anti-flap", rawFlips, len(ties))
	}
	// The status says the same rounds, and that the map is the users'.
	var st api.LatencyStatus
	if _, body := n.call("GET", "/v1/latency", "tok", ""); json.Unmarshal([]byte(body), &st) != nil || st.RUM == nil ||
		st.RUM.Rounds < rounds+2 || st.RUM.Values != 3*total || st.RUM.Share != 1 {
		t.Errorf("GET /v1/latency: %s", body)
	}
	// Every answer's scope, once more, over everything.
	checkRUMScopes(t, n, pop, n.rumAnswers(pop, all), "after the flapping rounds", rnd)
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 1e9
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// postRUMRound posts k beacons from each network of idx to each site,
// drawn from the model, through the beacon listener, in one batch (the
// test's limits allow it): a batch is applied at once, so the first RUM
// round counted after the post began feeds all of it (rounds happen only
// when cells changed, and the previous round's were all fed); samples
// collects them.
func (n *testNode) postRUMRound(pop *rumPopulation, idx []int, k int, rnd *rand.Rand, samples [][3][]float64) {
	n.t.Helper()
	var b strings.Builder
	lines := 0
	flush := func() {
		if lines == 0 {
			return
		}
		req, err := http.NewRequest("POST", "http://"+n.RUMAddr()+"/v1/beacons", strings.NewReader(b.String()))
		if err != nil {
			n.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer beacon-key")
		// A loaded machine (two cores shared by many tests) can take
		// seconds over a batch.
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			n.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			n.t.Fatalf("beacons: %d %s", resp.StatusCode, body)
		}
		b.Reset()
		lines = 0
	}
	for _, i := range idx {
		nt := &pop.nets[i]
		for s, site := range rumSites {
			for range k {
				ms := nt.beacon(rnd, s)
				samples[i][s] = append(samples[i][s], ms)
				// A user's own address in the network; the node keeps
				// only its /24.
				a := nt.block.Addr().As4()
				a[3] = byte(1 + rnd.IntN(254))
				fmt.Fprintf(&b, `{"client":"%s","site":"%s","rtt_ms":%.2f}`+"\n", netip.AddrFrom4(a), site.name, ms)
				lines++
			}
		}
	}
	flush()
}

// rumRounds is how many RUM rounds have fed the latency map (read in
// the process: GET /v1/latency says the same, at a cost a loop polling
// it every few milliseconds would feel).
func (n *testNode) rumRounds() uint64 {
	n.rum.mu.Lock()
	defer n.rum.mu.Unlock()
	return n.rum.rounds
}

// waitRUMRound waits for a RUM round after before (read before the
// beacons were posted) to feed the latency map.
func (n *testNode) waitRUMRound(before uint64, what string) {
	n.t.Helper()
	dnstest.WaitFor(n.t, 20*time.Second, what+": a RUM round feeds the map", func() bool { return n.rumRounds() > before })
}

// rumAnswers asks the node, over UDP with an ECS option of each network
// of idx, for www.example.com and returns the site and scope of each
// answer (in idx order).
func (n *testNode) rumAnswers(pop *rumPopulation, idx []int) []rumAnswer {
	n.t.Helper()
	out := make([]rumAnswer, len(idx))
	byAddr := map[string]int{}
	for s, site := range rumSites {
		byAddr[site.addr] = s
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < len(idx); j += workers {
				a, err := n.askECS(pop.nets[idx[j]].block, byAddr)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					continue
				}
				out[j] = a
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		n.t.Fatalf("%d queries failed: %s", len(errs), errs[0])
	}
	return out
}

// askECS asks for www.example.com A with block as the ECS subnet,
// retrying a lost UDP query.
func (n *testNode) askECS(block netip.Prefix, byAddr map[string]int) (rumAnswer, error) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(block.Bits()), Address: block.Addr().AsSlice()})
	m.Extra = append(m.Extra, o)
	c := &dns.Client{Timeout: time.Second}
	var err error
	for range 3 {
		var r *dns.Msg
		if r, _, err = c.Exchange(m, n.dns.String()); err != nil {
			continue
		}
		if len(r.Answer) != 1 {
			return rumAnswer{}, fmt.Errorf("%s: %d answers: %v", block, len(r.Answer), r)
		}
		a, ok := r.Answer[0].(*dns.A)
		s, known := byAddr[a.A.String()]
		if !ok || !known {
			return rumAnswer{}, fmt.Errorf("%s: answer %v", block, r.Answer[0])
		}
		scope := -1
		if opt := r.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if e, ok := o.(*dns.EDNS0_SUBNET); ok {
					scope = int(e.SourceScope)
				}
			}
		}
		return rumAnswer{site: s, scope: scope}, nil
	}
	return rumAnswer{}, fmt.Errorf("%s: %v", block, err)
}

// checkRUMScopes is the scope check over every answer: an answer's ECS
// scope says that every address inside it gets the same answer (as
// policy's tests check of Decide, here over the wire). Every network of
// the population inside it must have got the same site, and one /24 of
// each scope wider than /24 that is no network of the population is
// asked too.
func checkRUMScopes(t *testing.T, n *testNode, pop *rumPopulation, ans []rumAnswer, phase string, rnd *rand.Rand) {
	t.Helper()
	addrs := make([]netip.Addr, len(pop.nets))
	for i, nt := range pop.nets {
		addrs[i] = nt.block.Addr()
	}
	if !slices.IsSortedFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) }) {
		t.Fatal("the population is not in address order")
	}
	byAddr := map[string]int{}
	for s, site := range rumSites {
		byAddr[site.addr] = s
	}
	hist := map[int]int{}
	probed := map[netip.Prefix]bool{}
	bad := 0
	for i, a := range ans {
		hist[a.scope]++
		if a.scope < 0 || a.scope > 32 {
			t.Errorf("%s: %s has no ECS scope (%d)", phase, pop.nets[i].block, a.scope)
			continue
		}
		p, _ := pop.nets[i].block.Addr().Prefix(min(a.scope, 24))
		lo := sort.Search(len(addrs), func(j int) bool { return addrs[j].Compare(p.Addr()) >= 0 })
		for j := lo; j < len(addrs) && p.Contains(addrs[j]); j++ {
			if ans[j].site != a.site {
				if bad++; bad <= 5 {
					t.Errorf("%s: %s's scope /%d claims %s, but %s in it gets %s", phase, pop.nets[i].block, a.scope,
						rumSites[a.site].name, pop.nets[j].block, rumSites[ans[j].site].name)
				}
			}
		}
		if a.scope >= 24 || probed[p] {
			continue
		}
		probed[p] = true
		// A /24 inside the scope that no network of the population is.
		for range 8 {
			b := p.Addr().As4()
			off := rnd.Uint32() & (1<<(32-p.Bits()) - 1) &^ 0xff
			v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | off
			q := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0}), 24)
			if _, ok := pop.index[q]; ok {
				continue
			}
			got, err := n.askECS(q, byAddr)
			if err != nil {
				t.Fatal(err)
			}
			if got.site != a.site {
				if bad++; bad <= 5 {
					t.Errorf("%s: %s's scope /%d claims %s, but %s in it gets %s", phase, pop.nets[i].block, a.scope,
						rumSites[a.site].name, q, rumSites[got.site].name)
				}
			}
			break
		}
	}
	t.Logf("%s: ECS scopes %v (scope: answers), %d wider scopes probed outside the population", phase, hist, len(probed))
}
