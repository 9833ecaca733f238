// Package latency is the latency map: measured round-trip times from client
// networks to sites, smoothed and aged, with an estimate from distance, and
// the anti-flap state that keeps a network's choice stable.
//
// Measurements are keyed by a client network. Key kinds, in order of
// precedence (most specific first):
//
//   - CIDR prefix, IPv4 or IPv6 ("203.0.113.0/24", "2001:db8::/32");
//     among prefixes the longest match wins.
//   - ASN: "AS" followed by the decimal number ("AS64496").
//   - Subdivision: ISO 3166-2 code ("IN-MH").
//   - Country: ISO 3166-1 alpha-2 code ("IN").
//   - Continent: "continent:" followed by one of AF AN AS EU NA OC SA
//     ("continent:AS"). The colon cannot occur in a country, subdivision or
//     ASN key, so a continent key never clashes with a country code such as
//     "AS" (American Samoa).
//
// Keys are case-insensitive on input and stored in the canonical form shown
// above (upper case, prefixes masked). Client fields passed to Lookup are
// expected in the form package geo produces (upper-case codes).
//
// A Store owns the current Map. Update smooths a batch of measurements into
// the store's values (an exponentially weighted moving average with a
// half-life), builds a new immutable Map off the query path and publishes it
// atomically; Map.Lookup never takes a lock and does not allocate beyond the
// slice it returns. Hysteresis keeps each network's chosen site stable;
// a caller that keeps its networks' states itself applies the same rule to
// each Choice with Hysteresis.Step.
//
// The server feeds a Store from files and the admin API; package policy
// turns each published Map into per-network choices, evaluated once per
// group of records that evaluate alike (see policy.Live.SetLatency and
// policy.LatencyMemory).
//
// Metrics (metrics.go) are the map's own steer_latency_* series, which the
// server sets as it updates and evaluates the map.
package latency

import (
	"maps"
	"math"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/geo"
)

// Defaults applied by NewStore and NewHysteresis to zero Options fields.
const (
	DefaultSwitchMargin = 0.2
	DefaultSwitchRounds = 3
	DefaultKmPerMs      = 200
	DefaultOverheadMs   = 5
)

// Options configure a Store and a Hysteresis.
type Options struct {
	// HalfLife is the smoothing half-life: a new measurement taken dt after
	// the current value gets weight 1-2^(-dt/HalfLife). Zero replaces.
	HalfLife time.Duration
	// MaxAge is how old (by MeasuredAt) a value may be before Lookup treats
	// it as stale and skips it. Zero means values never go stale.
	MaxAge time.Duration
	// SwitchMargin is the relative improvement a new best site needs over
	// the current one before Hysteresis considers switching (default 0.2:
	// best <= current*(1-0.2)).
	SwitchMargin float64
	// SwitchRounds is how many consecutive updates the improvement must be
	// seen for before Hysteresis switches (default 3).
	SwitchRounds int
	// KmPerMs is the one-way propagation speed used by the estimate
	// (default 200 km/ms, about light in fibre).
	KmPerMs float64
	// OverheadMs is added to every estimate, as given (the configuration's
	// default is DefaultOverheadMs).
	OverheadMs float64
	// RUMWeight is the weight of real-user measurements (Measurement.RUM)
	// against probe measurements where a network has both for a site:
	// the RTT is RUMWeight*rum + (1-RUMWeight)*probe. Where only RUM has
	// a value it is used whole (over an estimate). Zero ignores RUM.
	RUMWeight float64
}

// WithDefaults returns o with zero fields (but OverheadMs, taken as
// given) set to the defaults.
func (o Options) WithDefaults() Options {
	if o.SwitchMargin == 0 {
		o.SwitchMargin = DefaultSwitchMargin
	}
	if o.SwitchRounds <= 0 {
		o.SwitchRounds = DefaultSwitchRounds
	}
	if o.KmPerMs <= 0 {
		o.KmPerMs = DefaultKmPerMs
	}
	return o
}

// Measurement is one measured round-trip time from a client network (Key)
// to a site.
type Measurement struct {
	Key        string    // see the package documentation for key kinds
	Site       string    // site name
	RTTms      float64   // round-trip time in milliseconds, >= 0
	Samples    int       // how many probes the value summarises, >= 1
	MeasuredAt time.Time // when it was measured
	// Origin is where the measurement was read (set by ParseCSV and
	// ParseJSON); Check names entries by it.
	Origin Origin
	// RUM marks a real-user measurement (package rum), keyed by a CIDR
	// prefix. RUM values are kept apart from probe values and blended
	// with them by Options.RUMWeight at Lookup.
	RUM bool
	// Forget, with RUM, removes every real-user value of Key instead
	// (the RUM store evicted the block); Site, RTTms and Samples are
	// then not read.
	Forget bool
}

// Client is what Lookup knows about the client network asking.
type Client struct {
	Addr netip.Addr // client or ECS address; invalid when unknown
	// Bits, when > 0, limits the CIDR keys considered to those at most
	// this long: Lookup then answers for the whole network Addr/Bits.
	Bits                            int
	ASN                             uint32 // 0 when unknown
	Subdivision, Country, Continent string // upper-case codes as in geo.Info, "" when unknown
	Lat, Lon                        float64
	HasLocation                     bool
}

// Site is a destination whose RTT Lookup reports.
type Site struct {
	Name        string
	Lat, Lon    float64
	HasLocation bool
}

// Sources reported in RTT.Source.
const (
	SourceMeasured  = "measured"
	SourceEstimated = "estimated"
	SourceNone      = "none"
	// SourceStale is not a Source: explain uses it to say that a stale
	// measurement was skipped (RTT.Stale).
	SourceStale = "stale"
)

// RTT is Lookup's answer for one site.
type RTT struct {
	Site   string
	Ms     float64 // 0 when Source is "none"
	Source string  // "measured", "estimated" or "none"
	Key    string  // the key the measurement came from ("" unless measured)
	// Stale is set when a more specific key had a measurement for this
	// site that was older than MaxAge and was skipped, so the answer is a
	// fallback.
	Stale bool
	// RUMKey is the real-user value's key ("rum:192.0.2.0/24") when one
	// went into Ms, with that value in RUMms; Key is then the probe's
	// key, or RUMKey when no probe measured the site.
	RUMKey string
	RUMms  float64
}

// value is one smoothed (key, site) value.
type value struct {
	site string
	ms   float64
	at   time.Time // MeasuredAt of the newest measurement folded in
}

// entry is every site value of one key in a Map, sorted by site.
type entry struct {
	key   string
	sites []value
}

// find returns the value for site, or nil.
func (e *entry) find(site string) *value {
	for i := range e.sites {
		if e.sites[i].site == site {
			return &e.sites[i]
		}
	}
	return nil
}

// Map is an immutable snapshot of the latency map. It is safe for
// concurrent use.
type Map struct {
	o         Options
	update    uint64
	prefixGen uint64 // changes whenever the set of CIDR keys does
	store     *Store // the store that published the map
	cidr      map[netip.Prefix]*entry
	v4Bits    []int // prefix lengths present, longest first
	v6Bits    []int
	asn       map[uint32]*entry
	sub       map[string]*entry
	country   map[string]*entry
	continent map[string]*entry
	rum       map[netip.Prefix]*entry // real-user values (Measurement.RUM)
	rum4Bits  []int
	rum6Bits  []int
	values    int
	rumValues int
}

// RUMPrefix starts the key of a real-user value ("rum:192.0.2.0/24").
const RUMPrefix = "rum:"

// RUMValues returns how many of the map's values are real-user values.
func (m *Map) RUMValues() int {
	if m == nil {
		return 0
	}
	return m.rumValues
}

// maxChain bounds the keys one client can match: 129 prefix lengths plus
// ASN, subdivision, country and continent.
const maxChain = 129 + 4

// Update returns the Store update counter value this Map was published at.
func (m *Map) Update() uint64 { return m.update }

// NextStale returns the earliest time after now at which a value that is
// fresh at now turns stale, or the zero time when none will (no MaxAge, or
// no fresh values). A server re-evaluates its choices then.
func (m *Map) NextStale(now time.Time) time.Time {
	if m == nil || m.o.MaxAge <= 0 {
		return time.Time{}
	}
	var next time.Time
	for _, e := range m.all() {
		for i := range e.sites {
			t := e.sites[i].at.Add(m.o.MaxAge)
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}

// all returns every entry of the map.
func (m *Map) all() []*entry {
	out := make([]*entry, 0, len(m.cidr)+len(m.asn)+len(m.sub)+len(m.country)+len(m.continent)+len(m.rum))
	for _, e := range m.cidr {
		out = append(out, e)
	}
	for _, e := range m.rum {
		out = append(out, e)
	}
	for _, e := range m.asn {
		out = append(out, e)
	}
	for _, mm := range []map[string]*entry{m.sub, m.country, m.continent} {
		for _, e := range mm {
			out = append(out, e)
		}
	}
	return out
}

// SamePrefixes reports whether m and o have the same set of CIDR keys for
// certain (their values may differ), so a caller can keep what it derived
// from Prefixes.
func (m *Map) SamePrefixes(o *Map) bool {
	return m == o || m != nil && o != nil && m.store == o.store && m.store != nil && m.prefixGen == o.prefixGen
}

// Options returns the options the map was built with, defaults filled in.
func (m *Map) Options() Options {
	if m == nil {
		return Options{}.WithDefaults()
	}
	return m.o
}

// Len returns the number of (key, site) values in the map.
func (m *Map) Len() int { return m.values }

// Lookup appends to dst, for each site in order, the RTT from the most
// specific key matching c that has a non-stale value for that site (values
// older than MaxAge at now are skipped, falling back to less specific
// keys); else the estimate 2*distance_km/KmPerMs + OverheadMs when both
// locations are known; else Source "none". It does not allocate beyond
// growing dst.
func (m *Map) Lookup(dst []RTT, c *Client, sites []Site, now time.Time) []RTT {
	var chain, rchain [maxChain]*entry
	n, rn := 0, 0
	if m != nil {
		n = m.chain(&chain, c)
		if len(m.rum) > 0 && m.o.RUMWeight > 0 {
			rn = m.cidrChain(&rchain, m.rum, m.rum4Bits, m.rum6Bits, c)
		}
	}
	for _, s := range sites {
		r := RTT{Site: s.Name, Source: SourceNone}
		found := false
		for _, e := range chain[:n] {
			v := e.find(s.Name)
			if v == nil {
				continue
			}
			if m.o.MaxAge > 0 && now.Sub(v.at) > m.o.MaxAge {
				r.Stale = true
				continue
			}
			r.Ms, r.Source, r.Key = v.ms, SourceMeasured, e.key
			found = true
			break
		}
		if !found && c.HasLocation && s.HasLocation {
			o := Options{}
			if m != nil {
				o = m.o
			}
			o = o.WithDefaults()
			r.Ms = 2*Distance(c.Lat, c.Lon, s.Lat, s.Lon)/o.KmPerMs + o.OverheadMs
			r.Source = SourceEstimated
		}
		for _, e := range rchain[:rn] {
			v := e.find(s.Name)
			if v == nil {
				continue
			}
			if m.o.MaxAge > 0 && now.Sub(v.at) > m.o.MaxAge {
				r.Stale = true
				continue
			}
			r.RUMKey, r.RUMms = e.key, v.ms
			if found {
				r.Ms = m.o.RUMWeight*v.ms + (1-m.o.RUMWeight)*r.Ms
			} else {
				// A user measurement beats a distance estimate.
				r.Ms, r.Source, r.Key = v.ms, SourceMeasured, e.key
			}
			break
		}
		dst = append(dst, r)
	}
	return dst
}

// chain fills chain with the entries matching c, most specific first, and
// returns how many there are.
func (m *Map) chain(chain *[maxChain]*entry, c *Client) int {
	n := m.cidrChain(chain, m.cidr, m.v4Bits, m.v6Bits, c)
	if c.ASN != 0 {
		if e := m.asn[c.ASN]; e != nil {
			chain[n] = e
			n++
		}
	}
	for _, kv := range [...]struct {
		m map[string]*entry
		k string
	}{{m.sub, c.Subdivision}, {m.country, c.Country}, {m.continent, c.Continent}} {
		if kv.k == "" {
			continue
		}
		if e := kv.m[kv.k]; e != nil {
			chain[n] = e
			n++
		}
	}
	return n
}

// cidrChain fills chain with the entries of cidr (whose prefix lengths
// are v4 and v6, longest first) matching c, most specific first.
func (m *Map) cidrChain(chain *[maxChain]*entry, cidr map[netip.Prefix]*entry, v4, v6 []int, c *Client) int {
	n := 0
	if !c.Addr.IsValid() || len(cidr) == 0 {
		return 0
	}
	a := c.Addr.Unmap()
	bits := v6
	if a.Is4() {
		bits = v4
	}
	for _, b := range bits {
		if c.Bits > 0 && b > c.Bits {
			continue
		}
		p, err := a.Prefix(b)
		if err != nil {
			continue
		}
		if e := cidr[p]; e != nil {
			chain[n] = e
			n++
		}
	}
	return n
}

// NumPrefixes returns how many CIDR keys the map has (probe and
// real-user keys alike, a prefix with both counted once).
func (m *Map) NumPrefixes() int {
	if m == nil {
		return 0
	}
	n := len(m.cidr)
	for p := range m.rum {
		if m.cidr[p] == nil {
			n++
		}
	}
	return n
}

// Prefixes returns every CIDR key of the map, sorted (IPv4 first, then by
// address and length).
func (m *Map) Prefixes() []netip.Prefix {
	if m == nil {
		return nil
	}
	out := make([]netip.Prefix, 0, len(m.cidr)+len(m.rum))
	for p := range m.cidr {
		out = append(out, p)
	}
	for p := range m.rum {
		if m.cidr[p] == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].Addr().Compare(out[j].Addr()); c != 0 {
			return c < 0
		}
		return out[i].Bits() < out[j].Bits()
	})
	return out
}

// Distance is the great-circle distance in kilometres (see geo.Distance).
func Distance(lat1, lon1, lat2, lon2 float64) float64 { return geo.Distance(lat1, lon1, lat2, lon2) }

// keyState is the Store's state for one key: its parsed form and the
// entry currently published for it. Entries are immutable once published;
// an update replaces a key's entry with a changed copy.
type keyState struct {
	k   Key
	rum bool // a real-user value's key (Measurement.RUM)
	e   *entry
}

// name is the key's name in Store.state and its entry's key.
func (ks *keyState) name() string {
	if ks.rum {
		return RUMPrefix + ks.k.String()
	}
	return ks.k.String()
}

// Store owns the current Map. Update is serialised; Map and Lookup on the
// returned Map never block on it.
type Store struct {
	o       Options
	mu      sync.Mutex // serialises Update and guards state
	state   map[string]*keyState
	bits4   [129]int // CIDR keys per prefix length
	bits6   [129]int
	rbits4  [129]int // real-user keys per prefix length
	rbits6  [129]int
	cur     atomic.Pointer[Map]
	updates atomic.Uint64
}

// NewStore returns a Store with an empty Map.
func NewStore(o Options) *Store {
	s := &Store{o: o.WithDefaults(), state: make(map[string]*keyState)}
	s.cur.Store(&Map{o: s.o, store: s, cidr: map[netip.Prefix]*entry{}, asn: map[uint32]*entry{}, sub: map[string]*entry{},
		country: map[string]*entry{}, continent: map[string]*entry{}, rum: map[netip.Prefix]*entry{}})
	return s
}

// Map returns the current Map.
func (s *Store) Map() *Map { return s.cur.Load() }

// Updates returns how many updates have been published.
func (s *Store) Updates() uint64 { return s.updates.Load() }

// Update applies one update (a file version or a push batch): each
// measurement is smoothed into the existing value for its (key, site) with
// weight 1-2^(-dt/HalfLife), dt being the time since that value's newest
// measurement (HalfLife 0 replaces; a measurement older than the value is
// ignored; a zero or future MeasuredAt counts as now). Measurements whose
// Validate fails are ignored. Values older than MaxAge are stale: Lookup
// skips them but reports that it did; they are dropped once older than
// twice MaxAge. A new Map is then published atomically; readers keep using
// the old one until the swap. The work is proportional to the keys the
// update touches, plus one copy of the key index.
func (s *Store) Update(ms []Measurement, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hl := s.o.HalfLife
	touched := make(map[*keyState]bool, min(len(ms), len(s.state)+len(ms)))
	for i := range ms {
		m := &ms[i]
		if m.Forget {
			if m.RUM {
				s.forget(m.Key, touched)
			}
			continue
		}
		if m.Validate() != nil {
			continue
		}
		at := m.MeasuredAt
		if at.IsZero() || at.After(now) {
			// A clock ahead of ours must not pin a value: later
			// measurements would all look older than it.
			at = now
		}
		var ks *keyState
		if !m.RUM {
			ks = s.state[m.Key]
		}
		if ks == nil {
			k, _ := ParseKey(m.Key)
			if m.RUM && k.Kind != KindCIDR {
				continue // real-user values are per network
			}
			ks = &keyState{k: k, rum: m.RUM}
			if old := s.state[ks.name()]; old != nil {
				ks = old
			} else {
				s.state[ks.name()] = ks
			}
		}
		if !touched[ks] {
			touched[ks] = true
			e := &entry{key: ks.name()}
			if ks.e != nil {
				e.sites = append(make([]value, 0, len(ks.e.sites)+1), ks.e.sites...)
			}
			ks.e = e
		}
		e := ks.e
		j := sort.Search(len(e.sites), func(j int) bool { return e.sites[j].site >= m.Site })
		if j == len(e.sites) || e.sites[j].site != m.Site {
			e.sites = slices.Insert(e.sites, j, value{site: m.Site, ms: m.RTTms, at: at})
			continue
		}
		v := &e.sites[j]
		dt := at.Sub(v.at)
		if dt < 0 {
			continue
		}
		w := 1.0
		if hl > 0 {
			w = 1 - math.Exp2(-float64(dt)/float64(hl))
		}
		v.ms += w * (m.RTTms - v.ms)
		v.at = at
	}
	if s.o.MaxAge > 0 {
		for _, ks := range s.state {
			old := 0
			for _, v := range ks.e.sites {
				if now.Sub(v.at) > 2*s.o.MaxAge {
					old++
				}
			}
			if old == 0 {
				continue
			}
			if !touched[ks] {
				touched[ks] = true
				ks.e = &entry{key: ks.e.key, sites: append([]value(nil), ks.e.sites...)}
			}
			ks.e.sites = slices.DeleteFunc(ks.e.sites, func(v value) bool { return now.Sub(v.at) > 2*s.o.MaxAge })
		}
	}
	u := s.updates.Load() + 1
	s.cur.Store(s.publish(touched, u))
	s.updates.Store(u)
}

// forget empties the real-user entry of key, if any; the caller holds
// s.mu. publish then removes it.
func (s *Store) forget(key string, touched map[*keyState]bool) {
	k, err := ParseKey(key)
	if err != nil || k.Kind != KindCIDR {
		return
	}
	ks := s.state[(&keyState{k: k, rum: true}).name()]
	if ks == nil {
		return
	}
	touched[ks] = true
	ks.e = &entry{key: ks.name()}
}

// publish returns the previous Map with the touched keys' entries
// replaced (or removed when empty); the caller holds s.mu.
func (s *Store) publish(touched map[*keyState]bool, update uint64) *Map {
	prev := s.cur.Load()
	m := &Map{o: s.o, update: update, values: prev.values, prefixGen: prev.prefixGen, store: s,
		cidr: maps.Clone(prev.cidr), asn: maps.Clone(prev.asn), sub: maps.Clone(prev.sub),
		country: maps.Clone(prev.country), continent: maps.Clone(prev.continent), rum: prev.rum, rumValues: prev.rumValues}
	rumCloned := false
	for ks := range touched {
		var had *entry
		switch {
		case ks.rum:
			had = prev.rum[ks.k.Prefix]
		case ks.k.Kind == KindCIDR:
			had = prev.cidr[ks.k.Prefix]
		case ks.k.Kind == KindASN:
			had = prev.asn[ks.k.ASN]
		case ks.k.Kind == KindSubdivision:
			had = prev.sub[ks.k.Code]
		case ks.k.Kind == KindCountry:
			had = prev.country[ks.k.Code]
		case ks.k.Kind == KindContinent:
			had = prev.continent[ks.k.Code]
		}
		if had != nil {
			m.values -= len(had.sites)
		}
		e := ks.e
		if len(e.sites) == 0 {
			e = nil
			delete(s.state, ks.name())
		}
		if e != nil {
			m.values += len(e.sites)
		}
		if ks.rum {
			if had != nil {
				m.rumValues -= len(had.sites)
			}
			if e != nil {
				m.rumValues += len(e.sites)
			}
			if !rumCloned {
				m.rum, rumCloned = maps.Clone(prev.rum), true
			}
		}
		if ks.k.Kind == KindCIDR {
			bits := &s.bits6
			switch {
			case ks.rum && ks.k.Prefix.Addr().Is4():
				bits = &s.rbits4
			case ks.rum:
				bits = &s.rbits6
			case ks.k.Prefix.Addr().Is4():
				bits = &s.bits4
			}
			switch {
			case had == nil && e != nil:
				bits[ks.k.Prefix.Bits()]++
				m.prefixGen = update
			case had != nil && e == nil:
				bits[ks.k.Prefix.Bits()]--
				m.prefixGen = update
			}
		}
		if ks.rum {
			setOrDelete(m.rum, ks.k.Prefix, e)
		} else {
			set(m, ks.k, e)
		}
	}
	for b := 128; b >= 0; b-- {
		if s.bits4[b] > 0 {
			m.v4Bits = append(m.v4Bits, b)
		}
		if s.bits6[b] > 0 {
			m.v6Bits = append(m.v6Bits, b)
		}
		if s.rbits4[b] > 0 {
			m.rum4Bits = append(m.rum4Bits, b)
		}
		if s.rbits6[b] > 0 {
			m.rum6Bits = append(m.rum6Bits, b)
		}
	}
	return m
}

// set stores e for k in m, or deletes k when e is nil.
func set(m *Map, k Key, e *entry) {
	switch k.Kind {
	case KindCIDR:
		setOrDelete(m.cidr, k.Prefix, e)
	case KindASN:
		setOrDelete(m.asn, k.ASN, e)
	case KindSubdivision:
		setOrDelete(m.sub, k.Code, e)
	case KindCountry:
		setOrDelete(m.country, k.Code, e)
	case KindContinent:
		setOrDelete(m.continent, k.Code, e)
	}
}

func setOrDelete[K comparable](mm map[K]*entry, k K, e *entry) {
	if e == nil {
		delete(mm, k)
	} else {
		mm[k] = e
	}
}
