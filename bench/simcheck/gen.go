package main

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The resolver sites of the population, in the order of every per-site
// slice: the big Unbound (no ECS), the ECS Unbound, the emulated small
// resolvers.
const (
	siteBig = iota
	siteECS
	siteSmall
	numSites
)

var siteNames = [numSites]string{"big-unbound", "ecs-unbound", "small"}

// Population is who asks: user queries arrive as one Poisson process of
// Rate per second; each goes to the big Unbound with probability BigShare,
// to the ECS Unbound with ECSShare (with the ECS option of one of Subnets,
// drawn evenly), and otherwise to one of Small emulated resolvers (drawn
// evenly).
type Population struct {
	Rate               float64
	BigShare, ECSShare float64
	Small              int
	Subnets            []netip.Prefix
}

func (p Population) siteRates() [numSites]float64 {
	return [numSites]float64{p.Rate * p.BigShare, p.Rate * p.ECSShare, p.Rate * (1 - p.BigShare - p.ECSShare)}
}

// genOptions is one run of the generator.
type genOptions struct {
	Pop           Population
	Duration, Bin time.Duration
	Big, ECS      netip.AddrPort // the Unbounds
	Steer         netip.AddrPort // where the emulated resolvers ask
	// DrainAt, when > 0, calls Drain at that offset (in its own
	// goroutine) and records when it was called and when it returned.
	DrainAt time.Duration
	Drain   func() error
	Seed    uint64
	// Tick is how often the arrival loop wakes (default 2 ms); arrivals
	// keep their exact Poisson times for binning and cache expiry.
	Tick time.Duration
	// Prime, when > 0, is a priming period before the run: each cache
	// entry the population can make (the big Unbound's, one per ECS
	// subnet, one per small resolver) is asked for once, at a uniformly
	// random moment of it, so that the run starts with the entries'
	// ages spread as in the steady state (the simulator starts there),
	// not all filled in the same second and expiring together. The TTL
	// plus a second covers an entry's whole life.
	Prime time.Duration
}

// Observed is what the generator's users saw.
type Observed struct {
	Start time.Time
	Bin   time.Duration
	// Counts[bin][site][pool]: user queries by the bin they were asked in
	// and the pool of the answer they got.
	Counts [][numSites][numPools]int64
	// Sent and Lost per site: user queries asked, and left unanswered
	// (lost on the way, or answered after the run ended).
	Sent, Lost [numSites]int64
	// DrainSent and DrainDone: offsets when the drain was asked for and
	// when the API answered; DrainErr its failure.
	DrainSent, DrainDone time.Duration
	DrainErr             error `json:"-"`
	// LastCanary[site]: the offset of the last user query answered with
	// the canary (-1: none).
	LastCanary [numSites]time.Duration
	// Late counts user queries sent more than lateAfter behind their
	// Poisson time (the process held back: a busy machine, a GC); they
	// are stamped with the time they were sent, since the caches they
	// meet age in real time. MaxLag is the largest such delay.
	Late   int64
	MaxLag time.Duration
	// ClockStep is how far the wall clock moved against the monotonic
	// one during the run (a step by the host's time sync): steer's query
	// log is stamped and Unbound's cache entries expire by the wall
	// clock, the generator by the monotonic one, so a step shifts the
	// one against the other.
	ClockStep time.Duration
}

// lateAfter is how far behind its arrival time a user query may be sent
// and keep that time: the loop wakes every Tick (2 ms), so a few ms is
// normal; beyond this the query is stamped with when it was sent.
const lateAfter = 50 * time.Millisecond

// canaryShare returns, per bin, the share of answered user queries that
// got the canary (over all sites), and the number answered.
func (o *Observed) canaryShare() (share []float64, n []int64) {
	share, n = make([]float64, len(o.Counts)), make([]int64, len(o.Counts))
	for i, b := range o.Counts {
		var c, all int64
		for s := range numSites {
			c += b[s][poolCanary]
			all += b[s][poolStable] + b[s][poolCanary] + b[s][poolOther]
		}
		n[i] = all
		if all > 0 {
			share[i] = float64(c) / float64(all)
		}
	}
	return share, n
}

// recorder counts answers; safe for concurrent use.
type recorder struct {
	bin    time.Duration
	counts [][numSites][numPools]atomic.Int64
	last   [numSites]atomic.Int64 // nanosecond offset of the last canary answer, -1 none
	lost   [numSites]atomic.Int64
}

func newRecorder(d, bin time.Duration) *recorder {
	n := int((d + bin - 1) / bin)
	r := &recorder{bin: bin, counts: make([][numSites][numPools]atomic.Int64, n)}
	for s := range numSites {
		r.last[s].Store(-1)
	}
	return r
}

func (r *recorder) add(site int, at time.Duration, pool int) {
	if at < 0 {
		return // a priming query, before the run
	}
	i := int(at / r.bin)
	if i >= len(r.counts) {
		return
	}
	r.counts[i][site][pool].Add(1)
	if pool == poolCanary {
		for {
			old := r.last[site].Load()
			if int64(at) <= old || r.last[site].CompareAndSwap(old, int64(at)) {
				break
			}
		}
	}
}

// poolOf reads the pool from an answer.
func poolOf(m *dns.Msg) (pool int, ttl uint32) {
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			switch a.A.String() {
			case stableAddr:
				return poolStable, a.Hdr.Ttl
			case canaryAddr:
				return poolCanary, a.Hdr.Ttl
			}
		}
	}
	return poolOther, 0
}

// stubClient asks one Unbound as the users' stub resolvers do: RD set,
// one UDP socket, answers matched by ID.
type stubClient struct {
	site  int
	conn  *net.UDPConn
	start time.Time
	rec   *recorder
	mu    sync.Mutex
	next  uint16
	// pending[id]: the asking user's offset+1 (0: free).
	pending [1 << 16]int64
	buf     []byte
}

func newStubClient(site int, to netip.AddrPort, start time.Time, rec *recorder) (*stubClient, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		return nil, err
	}
	_ = c.SetReadBuffer(4 << 20)
	return &stubClient{site: site, conn: c, start: start, rec: rec, buf: make([]byte, 0, 512)}, nil
}

func (c *stubClient) ask(at time.Duration, ecs netip.Prefix) error {
	m := new(dns.Msg)
	m.SetQuestion(recordName, dns.TypeA)
	m.RecursionDesired = true
	if ecs.IsValid() {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
			SourceNetmask: uint8(ecs.Bits()), Address: net.IP(ecs.Masked().Addr().AsSlice())})
	}
	c.mu.Lock()
	c.next++
	id := c.next
	m.Id = id
	if c.pending[id] != 0 {
		c.rec.lost[c.site].Add(1) // never answered within 65,536 queries
	}
	c.pending[id] = int64(at) + 1
	b, err := m.PackBuffer(c.buf)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = c.conn.Write(b)
	return err
}

func (c *stubClient) read() {
	buf := make([]byte, 1500)
	for {
		n, err := c.conn.Read(buf)
		if err != nil {
			return
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil {
			continue
		}
		c.mu.Lock()
		at := c.pending[m.Id]
		c.pending[m.Id] = 0
		c.mu.Unlock()
		if at == 0 {
			continue
		}
		pool, _ := poolOf(m)
		c.rec.add(c.site, time.Duration(at-1), pool)
	}
}

// unanswered counts the queries still pending (lost).
func (c *stubClient) unanswered() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.pending {
		if v != 0 {
			n++
		}
	}
	return n
}

// smallResolver is an emulated small resolver: one cache entry for the
// record, kept for the TTL steer gives from when the answer arrives; a
// user query after that (or before the first answer) is a miss, asked
// from the resolver's own address without ECS; users asking while a miss
// is in flight wait for its answer (as a resolver coalesces them).
type smallResolver struct {
	conn    *net.UDPConn
	start   time.Time
	rec     *recorder
	mu      sync.Mutex
	pool    int
	expires time.Duration // offset; 0: empty
	id      uint16
	sentAt  time.Duration
	waiting []time.Duration // users waiting for the miss in flight (nil: none)
	buf     []byte
}

func newSmallResolver(from netip.Addr, to netip.AddrPort, start time.Time, rec *recorder) (*smallResolver, error) {
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(to))
	if err != nil {
		return nil, err
	}
	return &smallResolver{conn: c, start: start, rec: rec, buf: make([]byte, 0, 512)}, nil
}

func (r *smallResolver) ask(at time.Duration) error {
	r.mu.Lock()
	if r.waiting == nil && at < r.expires {
		pool := r.pool
		r.mu.Unlock()
		r.rec.add(siteSmall, at, pool)
		return nil
	}
	resend := r.waiting != nil && at-r.sentAt > time.Second
	r.waiting = append(r.waiting, at)
	if len(r.waiting) > 1 && !resend {
		r.mu.Unlock()
		return nil
	}
	r.id++
	r.sentAt = at
	m := new(dns.Msg)
	m.SetQuestion(recordName, dns.TypeA)
	m.Id = r.id
	b, err := m.PackBuffer(r.buf)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = r.conn.Write(b)
	return err
}

func (r *smallResolver) read() {
	buf := make([]byte, 1500)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			return
		}
		now := time.Since(r.start)
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil {
			continue
		}
		r.mu.Lock()
		if m.Id != r.id || r.waiting == nil {
			r.mu.Unlock()
			continue
		}
		pool, ttl := poolOf(m)
		r.pool, r.expires = pool, now+time.Duration(ttl)*time.Second
		waiting := r.waiting
		r.waiting = nil
		r.mu.Unlock()
		for _, at := range waiting {
			r.rec.add(siteSmall, at, pool)
		}
	}
}

func (r *smallResolver) unanswered() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.waiting))
}

// generate plays the population against the resolvers for o.Duration
// and returns what the users saw.
func generate(o genOptions) (*Observed, error) {
	if o.Tick <= 0 {
		o.Tick = 2 * time.Millisecond
	}
	rates := o.Pop.siteRates()
	if o.Pop.Rate <= 0 || rates[siteSmall] < 0 || (rates[siteSmall] > 0 && o.Pop.Small <= 0) ||
		(rates[siteECS] > 0 && len(o.Pop.Subnets) == 0) {
		return nil, errors.New("generate: bad population")
	}
	start := time.Now().Add(o.Prime)
	rec := newRecorder(o.Duration, o.Bin)
	big, err := newStubClient(siteBig, o.Big, start, rec)
	if err != nil {
		return nil, err
	}
	defer big.conn.Close()
	ecs, err := newStubClient(siteECS, o.ECS, start, rec)
	if err != nil {
		return nil, err
	}
	defer ecs.conn.Close()
	go big.read()
	go ecs.read()
	small := make([]*smallResolver, o.Pop.Small)
	for i := range small {
		if small[i], err = newSmallResolver(smallAddr(i), o.Steer, start, rec); err != nil {
			return nil, err
		}
		defer small[i].conn.Close()
		go small[i].read()
	}
	if o.Prime > 0 {
		if err := prime(o, start, big, ecs, small); err != nil {
			return nil, err
		}
	}
	obs := &Observed{Start: start, Bin: o.Bin, DrainSent: -1, DrainDone: -1}
	var drainWG sync.WaitGroup
	drained := o.DrainAt <= 0 || o.Drain == nil
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e7))
	var sent [numSites]int64
	next := time.Duration(rng.ExpFloat64() / o.Pop.Rate * float64(time.Second))
	time.Sleep(time.Until(start))
	tick := time.NewTicker(o.Tick)
	defer tick.Stop()
	var sendErrs int
	for {
		now := time.Since(start)
		if !drained && now >= o.DrainAt {
			drained = true
			drainWG.Add(1)
			go func() {
				defer drainWG.Done()
				obs.DrainSent = time.Since(start)
				obs.DrainErr = o.Drain()
				obs.DrainDone = time.Since(start)
			}()
		}
		for next <= now && next < o.Duration {
			u := rng.Float64() * o.Pop.Rate
			// A query the loop sends late meets caches that aged in real
			// time meanwhile: stamped with its Poisson time it would be
			// counted before the moment it really saw (after a stall
			// across the drain, as answered stable while the canary's
			// entries were still alive).
			at := next
			if lag := time.Since(start) - next; lag > lateAfter {
				at = next + lag
				obs.Late++
				obs.MaxLag = max(obs.MaxLag, lag)
			}
			var err error
			switch {
			case u < rates[siteBig]:
				sent[siteBig]++
				err = big.ask(at, netip.Prefix{})
			case u < rates[siteBig]+rates[siteECS]:
				sent[siteECS]++
				err = ecs.ask(at, o.Pop.Subnets[rng.IntN(len(o.Pop.Subnets))])
			default:
				sent[siteSmall]++
				err = small[rng.IntN(len(small))].ask(at)
			}
			if err != nil {
				sendErrs++
			}
			next += time.Duration(rng.ExpFloat64() / o.Pop.Rate * float64(time.Second))
		}
		if next >= o.Duration {
			break
		}
		<-tick.C
	}
	drainWG.Wait()
	// Answers in flight arrive within a second on loopback.
	time.Sleep(time.Second)
	obs.Sent = sent
	obs.ClockStep = time.Now().Round(0).Sub(start.Round(0)) - time.Since(start)
	obs.Lost[siteBig] = big.unanswered() + rec.lost[siteBig].Load()
	obs.Lost[siteECS] = ecs.unanswered() + rec.lost[siteECS].Load()
	for _, r := range small {
		obs.Lost[siteSmall] += r.unanswered()
	}
	obs.Counts = make([][numSites][numPools]int64, len(rec.counts))
	for i := range rec.counts {
		for s := range numSites {
			for p := range numPools {
				obs.Counts[i][s][p] = rec.counts[i][s][p].Load()
			}
		}
	}
	for s := range numSites {
		obs.LastCanary[s] = time.Duration(rec.last[s].Load())
	}
	if sendErrs > 0 {
		return obs, fmt.Errorf("generate: %d queries could not be sent", sendErrs)
	}
	return obs, nil
}

// prime asks for every entry once at a random moment of the priming
// period (offsets -o.Prime … 0); the answers are not recorded.
func prime(o genOptions, start time.Time, big, ecs *stubClient, small []*smallResolver) error {
	rng := rand.New(rand.NewPCG(o.Seed, 0x971e))
	type ev struct {
		at   time.Duration
		kind int
		i    int
	}
	evs := []ev{{-time.Duration(rng.Float64() * float64(o.Prime)), siteBig, 0}}
	for i := range o.Pop.Subnets {
		evs = append(evs, ev{-time.Duration(rng.Float64() * float64(o.Prime)), siteECS, i})
	}
	for i := range small {
		evs = append(evs, ev{-time.Duration(rng.Float64() * float64(o.Prime)), siteSmall, i})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Compare(a.at, b.at) })
	for _, e := range evs {
		time.Sleep(time.Until(start.Add(e.at)))
		var err error
		switch e.kind {
		case siteBig:
			err = big.ask(e.at, netip.Prefix{})
		case siteECS:
			err = ecs.ask(e.at, o.Pop.Subnets[e.i])
		default:
			err = small[e.i].ask(e.at)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
