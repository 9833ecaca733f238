// Package presign signs steered answers ahead of time. A signed zone's
// steered name answers with one of a few RRsets (policy.Record.AnswerSets:
// each pool, each multi-pool pick, each rotation window of a multivalue
// limit, each when_all_down result, each CNAME target), whatever the
// client: each is signed once when the snapshot is built, and kept across
// reloads while its signature is fresh. A health change that makes a new
// set reachable has it signed before the new state is published
// (policy.Live.OnHealth). The query path then finds every positive
// steered answer's RRSIG in a Table with no signature made, no lock and
// no allocation: the fast path sums the RdataSum of the records it wrote
// and looks the set up by (name, type, sum).
//
// A set no enumeration foresaw (a group's nested pick, say) is signed on
// the query's behalf once, within the signing budget (Query.Allow): kept
// in the Table for the next queries and in the shared dnssec.Cache. Over
// the budget, a UDP query gets no signature (zone.Answer.NeedSignature:
// the server answers TC=1) and a TCP one always does.
package presign

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/zone"
)

// Table holds the signed answer sets of one snapshot's steered records,
// keyed by owner (canonical), type and dnssec.SetSum.
type Table struct {
	sets map[dnssec.CacheKey]*dnssec.Entry // made by Build, read-only
	// byRec indexes sets by record (policy.Record.Index) and family (A
	// or CNAME 0, AAAA 1), then sum: the fast path's lookup hashes a
	// 64-bit sum, not the owner name.
	byRec [][2]map[uint64]*dnssec.Entry
	// late holds the sets signed after Build (health, a query): a map
	// replaced whole under mu, read lock-free.
	late atomic.Pointer[map[dnssec.CacheKey]*dnssec.Entry]
	mu   sync.Mutex

	policies *policy.Table
	signer   func(name string) *dnssec.Signer
	// Budget caps the signatures made on queries' behalf (shared by the
	// node's snapshots); Cache keeps them for other snapshots too.
	Budget *dnssec.Budget
	Cache  *dnssec.Cache
	now    func() time.Time

	// Signed and Reused count the sets Build signed and those it took,
	// fresh, from the previous table.
	Signed, Reused int
}

// Options are what a Table is built from.
type Options struct {
	// Policies are the snapshot's steered records.
	Policies *policy.Table
	// Signer returns the signer of the zone a steered name (canonical) is
	// answered from, nil when that zone is not signed.
	Signer func(name string) *dnssec.Signer
	// Previous is the table of the snapshot being served: its fresh
	// signatures over the same sets are kept.
	Previous *Table
	// Live, when it has a health state (a reload keeps it, or the table
	// was built anew while pools are down), adds the sets that state
	// makes reachable (policy.Live.Reachable).
	Live *policy.Live
	// Budget and Cache are the node's (nil: the previous table's, or new).
	Budget *dnssec.Budget
	Cache  *dnssec.Cache
	// Workers sign in parallel (0: GOMAXPROCS).
	Workers int
	// Now is the time Build signs at (nil: time.Now); later signatures
	// (health, queries) are made at the time they are made.
	Now func() time.Time
}

// Build signs every answer set of every steered record whose zone is
// signed, reusing the previous table's fresh signatures. It returns nil
// (and no error) when no steered record is in a signed zone.
func Build(o Options) (*Table, error) {
	if o.Policies == nil || o.Signer == nil {
		return nil, nil
	}
	t := &Table{sets: map[dnssec.CacheKey]*dnssec.Entry{}, policies: o.Policies, signer: o.Signer,
		Budget: o.Budget, Cache: o.Cache, now: time.Now}
	if p := o.Previous; p != nil {
		if t.Budget == nil {
			t.Budget = p.Budget
		}
		if t.Cache == nil {
			t.Cache = p.Cache
		}
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	type job struct {
		key dnssec.CacheKey
		rrs []dns.RR
		s   *dnssec.Signer
	}
	var jobs []job
	signed := false
	add := func(r *policy.Record, s *dnssec.Signer, qt uint16, rrs []dns.RR) {
		k := dnssec.CacheKey{Name: r.Name, Type: qt, Sum: dnssec.SetSum(rrs)}
		if _, ok := t.sets[k]; ok {
			return
		}
		if e := o.Previous.lookup(k); e != nil && reusable(s, e, rrs, now) {
			t.sets[k] = e
			t.Reused++
			return
		}
		t.sets[k] = nil // claimed: signed below
		jobs = append(jobs, job{k, append([]dns.RR(nil), rrs...), s})
	}
	for _, r := range o.Policies.Records {
		s := o.Signer(r.Name)
		if s == nil {
			continue
		}
		signed = true
		r.AnswerSets(func(qt uint16, rrs []dns.RR) { add(r, s, qt, rrs) })
	}
	if !signed {
		return nil, nil
	}
	// Made only for a table that signs: the cache's slots are 512 KiB.
	if t.Budget == nil {
		t.Budget = dnssec.NewBudget(0)
	}
	if t.Cache == nil {
		t.Cache = dnssec.NewCache(0)
	}
	if o.Live != nil && o.Live.Table() == o.Policies {
		o.Live.Reachable(func(r *policy.Record, qt uint16, rrs []dns.RR) {
			if s := o.Signer(r.Name); s != nil {
				add(r, s, qt, rrs)
			}
		})
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(jobs)/64+1))
	entries := make([]*dnssec.Entry, len(jobs))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(jobs); i += workers {
				j := jobs[i]
				e, err := j.s.SignEntry(j.key, j.rrs, now, dnssec.ReasonSteered)
				if err != nil {
					errs[w] = err
					return
				}
				entries[i] = e
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for i, j := range jobs {
		t.sets[j.key] = entries[i]
	}
	t.Signed = len(jobs)
	t.byRec = make([][2]map[uint64]*dnssec.Entry, len(o.Policies.Records))
	for k, e := range t.sets {
		r := o.Policies.Get(k.Name)
		if r == nil || r.Index >= len(t.byRec) {
			continue
		}
		m := &t.byRec[r.Index][family(k.Type)]
		if *m == nil {
			*m = map[uint64]*dnssec.Entry{}
		}
		(*m)[k.Sum] = e
	}
	return t, nil
}

func family(qtype uint16) int {
	if qtype == dns.TypeAAAA {
		return 1
	}
	return 0
}

// LookupRecord is Lookup for the steered record r of the table's
// policies: the fast path's, which hashes the sum alone.
func (t *Table) LookupRecord(r *policy.Record, qtype uint16, sum uint64) *dnssec.Entry {
	if t == nil {
		return nil
	}
	if r.Index < len(t.byRec) && t.policies.Records[r.Index] == r {
		if e := t.byRec[r.Index][family(qtype)][sum]; e != nil && e.Key.Type == qtype {
			return e
		}
	}
	return t.lookup(dnssec.CacheKey{Name: r.Name, Type: qtype, Sum: sum})
}

// reusable reports whether e, a previous table's entry for the same key,
// still serves rrs: fresh signatures by s's keys over the same TTL.
func reusable(s *dnssec.Signer, e *dnssec.Entry, rrs []dns.RR, now time.Time) bool {
	if len(e.Sigs) == 0 || len(e.RRs) != len(rrs) || !s.Fresh(e.Sigs, rrs[0].Header().Rrtype, now) {
		return false
	}
	return e.Sigs[0].(*dns.RRSIG).OrigTtl == rrs[0].Header().Ttl
}

// Lookup returns the signed set named (name, qtype, sum), nil when it
// was not signed. It neither locks nor allocates.
func (t *Table) Lookup(name string, qtype uint16, sum uint64) *dnssec.Entry {
	return t.lookup(dnssec.CacheKey{Name: name, Type: qtype, Sum: sum})
}

func (t *Table) lookup(k dnssec.CacheKey) *dnssec.Entry {
	if t == nil {
		return nil
	}
	if e := t.sets[k]; e != nil {
		return e
	}
	if m := t.late.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// Len returns the number of sets signed (by Build and since).
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	n := len(t.sets)
	if m := t.late.Load(); m != nil {
		n += len(*m)
	}
	return n
}

// add makes e found by Lookup from now on.
func (t *Table) add(e *dnssec.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.late.Load()
	n := map[dnssec.CacheKey]*dnssec.Entry{}
	if old != nil {
		if _, ok := (*old)[e.Key]; ok {
			return
		}
		for k, v := range *old {
			n[k] = v
		}
	}
	n[e.Key] = e
	t.late.Store(&n)
}

// Watch makes live's health changes sign the sets they make reachable
// before the new state is published (see policy.Live.OnHealth). A set
// that fails to sign is left to the query path.
func (t *Table) Watch(live *policy.Live) {
	if t == nil || live == nil {
		return
	}
	live.OnHealth(func(r *policy.Record, qt uint16, rrs []dns.RR) {
		k := dnssec.CacheKey{Name: r.Name, Type: qt, Sum: dnssec.SetSum(rrs)}
		if t.lookup(k) != nil {
			return
		}
		s := t.signer(r.Name)
		if s == nil {
			return
		}
		if e, err := s.SignEntry(k, append([]dns.RR(nil), rrs...), t.now(), dnssec.ReasonSteered); err == nil {
			t.add(e)
		}
	})
}

// Query is one query's zone.Signing: the signatures of its steered
// answers from t, and its share of the signing budget (TCP: unlimited, as
// a spoofed source cannot come back over TCP).
type Query struct {
	// T is the snapshot's table (nil: no steered name is signed).
	T *Table
	// Budget is the node's signing budget (nil: T's; none: unlimited).
	Budget *dnssec.Budget
	// Cache is the node's cache of signatures made on demand (nil: T's).
	Cache *dnssec.Cache
	TCP   bool
	// Now is the query's time in Unix nanoseconds (the budget's clock).
	Now int64
}

// Allow implements zone.Signing: one more signature may be made now.
func (q *Query) Allow() bool {
	if q.TCP {
		return true
	}
	b := q.Budget
	if b == nil && q.T != nil {
		b = q.T.Budget
	}
	return b.Take(q.Now)
}

// DenialCache implements zone.DenialCacher: denials are kept in the
// node's cache, which its snapshots share.
func (q *Query) DenialCache() *dnssec.Cache {
	if q.Cache == nil && q.T != nil {
		return q.T.Cache
	}
	return q.Cache
}

// Steered implements zone.Signing: the RRSIGs over rrs, the set the
// steered name answers with, carrying the TTL rrs are served with. A set
// not signed ahead is signed now when the budget allows, once: it is
// kept in the table and the cache.
func (q *Query) Steered(z *zone.Zone, name string, qtype uint16, rrs []dns.RR) []dns.RR {
	if q.T == nil || len(rrs) == 0 {
		return nil
	}
	h := rrs[0].Header()
	k := dnssec.CacheKey{Name: name, Type: h.Rrtype, Sum: dnssec.SetSum(rrs)}
	e := q.T.lookup(k)
	if e == nil {
		s := q.signer(z, k.Name)
		// The node's cache outlives a key change: an entry serves only
		// when this zone's keys made it and it is fresh.
		if c := q.DenialCache().Get(k, uint32(q.Now/int64(time.Second))); c != nil && s != nil && s.Fresh(c.Sigs, k.Type, time.Unix(0, q.Now)) {
			e = c
		} else if e = q.sign(s, k, rrs); e == nil {
			return nil
		}
	}
	return withTTL(e.Sigs, h.Ttl)
}

// signer is the signer of the zone answering name.
func (q *Query) signer(z *zone.Zone, name string) *dnssec.Signer {
	if z != nil {
		if s := z.SteeredSigner(); s != nil {
			return s
		}
	}
	return q.T.signer(name)
}

// sign signs rrs with s on the query's behalf, within the budget.
func (q *Query) sign(s *dnssec.Signer, k dnssec.CacheKey, rrs []dns.RR) *dnssec.Entry {
	if s == nil || !q.Allow() {
		return nil
	}
	// Signed with the record's own TTL, as Build would: a degraded TTL
	// only shortens how long the answer is served.
	ttl := rrs[0].Header().Ttl
	if r := q.T.policies.Get(k.Name); r != nil {
		ttl = r.TTL
	}
	set := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Ttl != ttl {
			rr = dns.Copy(rr)
			rr.Header().Ttl = ttl
		}
		set[i] = rr
	}
	e, err := s.SignEntry(k, set, q.T.now(), dnssec.ReasonOnline)
	if err != nil {
		return nil
	}
	q.T.add(e)
	if c := q.DenialCache(); c != nil {
		c.Put(e)
	}
	return e
}

// withTTL returns sigs served with TTL ttl (copies when it differs).
func withTTL(sigs []dns.RR, ttl uint32) []dns.RR {
	if len(sigs) == 0 || sigs[0].Header().Ttl == ttl {
		return sigs
	}
	out := make([]dns.RR, len(sigs))
	for i, s := range sigs {
		c := dns.Copy(s)
		c.Header().Ttl = ttl
		out[i] = c
	}
	return out
}

var (
	_ zone.Signing      = (*Query)(nil)
	_ zone.DenialCacher = (*Query)(nil)
)
