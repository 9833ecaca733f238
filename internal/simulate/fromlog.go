package simulate

// fromlog.go: a scenario population inferred from steer's own query log.
//
// The authoritative sees only the resolvers' cache misses. For one record
// the entries are grouped by key = (resolver address, ECS block), the ECS
// block being the ECS source prefix masked to the scope steer returned:
// the cache entry a resolver that honours the scope keeps. Without ECS the
// key is the resolver alone.
//
// Per key, n misses over the log's span S give the miss rate m = n / (s·S)
// (s: the log's sample rate). A cache that keeps an answer for T and then
// waits for the next user query is a renewal process with cycle T + 1/λ',
// so with k independent caches behind the address, each getting λ/k of the
// users' Poisson queries,
//
//	m = λ / (1 + λT/k)   and   λ̂ = m / (1 − mT/k).
//
// When mT/k ≥ 0.9 the caches almost never sit idle: the count of misses
// then says little about how many users ask (a 1 % error in m is a 10 %
// or larger error in λ̂), so the key is flagged saturated and λ̂ is set to
// the lower bound 9k/T, the rate at which k caches would be busy 90 % of
// the time.
//
// k is estimated per resolver from pairs of misses of one key closer than
// w = 0.8·T: one cache never misses twice within its TTL, while with k
// caches each miss is followed within w by (k−1)/k · m·w misses of the
// other caches on average (they are independent and stationary). Pooling
// a resolver's keys, r = pairs / Σ n·m·w estimates (k−1)/k, and
// k̂ = round(1/(1−r)). The window is 0.8·T rather than T so that a
// resolver refreshing an entry shortly before it expires (Unbound's
// prefetch at 90 % of the TTL) is not mistaken for a second cache.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FromLogOptions say what the query log cannot.
type FromLogOptions struct {
	// TTL is the record's TTL (what a resolver keeps an answer for); 0:
	// from the log's lines when they have it (steer's log does not), else
	// FromLog fails asking for it.
	TTL time.Duration
	// Record is the name to model; "": the most asked steered name (one
	// whose entries have a pool).
	Record string
	// Sample is the log's sample rate (query_log.sample), 0 < Sample ≤ 1;
	// 0 means 1 (every query logged), and the report says it assumed so.
	Sample float64
}

// LogReport is what FromLog inferred and what it could not.
type LogReport struct {
	// Record is the modelled name (canonical, final dot) and Type its
	// query type.
	Record string
	Type   string
	// TTL is the TTL used and TTLFrom where it came from ("--ttl" or
	// "log").
	TTL     time.Duration
	TTLFrom string
	Sample  float64
	// Start and End are the first and last entry's times; Span = End −
	// Start is every key's observation span.
	Start, End time.Time
	Span       time.Duration
	// Gap is the longest silence between two entries, from GapStart: a
	// node down or a rotated file missing from the log would show here.
	Gap      time.Duration
	GapStart time.Time
	// Lines counts the lines read (blank ones included), Entries the
	// parseable ones and RecordEntries those of the modelled record and
	// type. Bad counts unparseable lines; BadLines are the first few.
	Lines, Entries, RecordEntries, Bad int
	BadLines                           []BadLine
	// Names are the names seen, most entries first (at most 10).
	Names []NameCount
	// Keys are the (resolver, ECS block) keys, highest λ̂ first.
	Keys []LogKey
	// Resolvers are the resolver addresses with their cache estimate.
	Resolvers []LogResolver
	// Totals over the keys.
	Misses    int
	MissRate  float64 // misses per second (sample-corrected)
	UserRate  float64 // Σ λ̂, user queries per second (a lower bound when any key is saturated)
	Saturated int     // saturated keys
	ECSKeys   int     // keys with an ECS block
	Sites     int     // resolver sites in the scenario
	Groups    int     // client groups in the scenario
	// Unknown lists what could not be inferred, one sentence each.
	Unknown []string
}

// BadLine is an unparseable line of the log.
type BadLine struct {
	Line   int
	Reason string
}

// NameCount is a name in the log and its number of entries.
type NameCount struct {
	Name    string
	Entries int
	Steered bool
}

// LogKey is one cache entry as the log shows it: a resolver and, with
// ECS, the block its cache keeps the answer for.
type LogKey struct {
	Resolver netip.Addr
	// Block is the ECS source masked to the returned scope; invalid
	// without ECS.
	Block netip.Prefix
	// Sources is the number of distinct ECS source prefixes seen in the
	// block.
	Sources int
	Site    string
	Misses  int
	Span    time.Duration
	// MissRate is m, misses per second (sample-corrected); Rate λ̂, the
	// users' queries per second behind the key.
	MissRate float64
	Rate     float64
	// Saturated: mT/k ≥ 0.9, Rate is the lower bound 9k/T.
	Saturated bool
	// Caches is the resolver's k̂.
	Caches int
}

// LogResolver is one resolver address.
type LogResolver struct {
	Addr netip.Addr
	Site string
	Keys int
	// ECS: it sent ECS, with these source lengths (the most common per
	// family; 0 when that family was not seen).
	ECS                bool
	SourceV4, SourceV6 int
	// Pairs is the number of pairs of misses of one key closer than
	// w = 0.8·T; Ratio = Pairs / Σ n·m·w over its keys estimates (k−1)/k;
	// Caches is k̂.
	Pairs  int
	Ratio  float64
	Caches int
}

// logLine is the part of a query-log line FromLog reads (querylog's line
// type; TTL is read when a log has it, steer's does not yet).
type logLine struct {
	Time   string   `json:"time"`
	Client string   `json:"client"`
	ECS    string   `json:"ecs"`
	Scope  *int     `json:"scope"`
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Pool   string   `json:"pool"`
	TTL    *float64 `json:"ttl"`
}

type logEntry struct {
	t      time.Time
	client netip.Addr
	ecs    netip.Prefix // invalid: none (or source /0)
	scope  int          // -1: no ECS option returned
	name   string
	qtype  string
	pool   bool
	ttl    float64 // seconds, -1 unknown
}

// maxBadLines is how many unparseable lines the report quotes.
const maxBadLines = 5

// satThreshold is the mT/k above which a key is saturated.
const satThreshold = 0.9

// pairWindow is the fraction of the TTL within which two misses of one key
// reveal a second cache.
const pairWindow = 0.8

// maxCaches caps k̂.
const maxCaches = 64

// FromLog reads steer's query log (JSON lines) and infers a scenario
// population for one record: client groups with prefixes and rates,
// resolver sites with their caches and ECS behaviour, over the log's span
// in 1-minute bins, with no events. The report says per key what was
// measured and inferred, and what could not be.
func FromLog(r io.Reader, o FromLogOptions) (*Scenario, *LogReport, error) {
	rep := &LogReport{Sample: o.Sample}
	if o.Sample == 0 {
		rep.Sample = 1
	} else if !(o.Sample > 0 && o.Sample <= 1) {
		return nil, nil, fmt.Errorf("from-log: sample %v out of range (0, 1]", o.Sample)
	}
	if o.TTL < 0 {
		return nil, nil, fmt.Errorf("from-log: negative TTL %v", o.TTL)
	}
	want := ""
	if o.Record != "" {
		want = canonical(o.Record)
	}
	entries, names, err := readLog(r, rep, want)
	if err != nil {
		return nil, rep, err
	}
	if rep.Entries == 0 {
		if rep.Bad > 0 {
			return nil, rep, fmt.Errorf("from-log: no parseable entry in %d lines (%s)", rep.Lines, badLinesText(rep.BadLines))
		}
		return nil, rep, errors.New("from-log: the log is empty")
	}
	rep.Names = names
	if len(rep.Names) > 10 {
		rep.Names = rep.Names[:10]
	}
	rec, err := chooseRecord(o.Record, names)
	if err != nil {
		return nil, rep, err
	}
	rep.Record = rec
	rep.Span = rep.End.Sub(rep.Start)

	// The record's entries, of its most asked address type (what users
	// ask; HTTPS, SVCB and the like are not steered).
	types := map[string]int{}
	for _, e := range entries {
		if e.name == rec {
			types[e.qtype]++
		}
	}
	qtype := "A"
	if types["AAAA"] > types["A"] {
		qtype = "AAAA"
	}
	if types[qtype] == 0 {
		return nil, rep, fmt.Errorf("from-log: no A or AAAA query for %s in the log (%s)", rec, typesText(types, ""))
	}
	rep.Type = qtype
	if len(types) > 1 {
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("only %s queries are modelled; the log also has %s for %s", qtype, typesText(types, qtype), rec))
	}
	var mine []logEntry
	for _, e := range entries {
		if e.name == rec && e.qtype == qtype {
			mine = append(mine, e)
		}
	}
	rep.RecordEntries = len(mine)

	// The TTL.
	switch {
	case o.TTL > 0:
		rep.TTL, rep.TTLFrom = o.TTL, "--ttl"
	default:
		var ttls []float64
		for _, e := range mine {
			if e.ttl > 0 {
				ttls = append(ttls, e.ttl)
			}
		}
		if len(ttls) == 0 {
			return nil, rep, fmt.Errorf("from-log: the TTL of %s is not in the log: give --ttl", rec)
		}
		sort.Float64s(ttls)
		rep.TTL = time.Duration(ttls[len(ttls)-1] * float64(time.Second)) // the record's TTL: the largest (answers from a cache count down)
		rep.TTLFrom = "log"
	}
	if rep.Span <= 0 {
		return nil, rep, fmt.Errorf("from-log: the log spans no time (one instant, %s): nothing to measure a rate over", rep.Start.Format(time.RFC3339))
	}

	infer(mine, rep)
	sc := buildScenario(rep, mine)
	notes(rep, mine, o)
	// The scenario as a scenario file would give it: read back from its
	// YAML, with ParseScenario's defaults and checks (a failure here is
	// a bug in FromLog, reported with the file's lines).
	parsed, err := ParseScenario(FromLogFile, FromLogYAML(sc, rep))
	if err != nil {
		return nil, rep, fmt.Errorf("from-log: the inferred scenario does not parse (a bug): %w", err)
	}
	return parsed, rep, nil
}

// FromLogFile is the file name a scenario from FromLog carries (in
// Scenario.File and its errors' file:line).
const FromLogFile = "(from-log)"

// readLog parses every line; unparseable ones are counted. It sets
// rep.Start and rep.End over every entry (a key's silence is information
// too: the span is the whole log's), counts the entries per name, and
// keeps the entries of the name want (every entry when want is "", the
// record being chosen after).
func readLog(r io.Reader, rep *LogReport, want string) ([]logEntry, []NameCount, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var out []logEntry
	strs := map[string]string{} // names and types, shared by the entries
	intern := func(s string) string {
		if v, ok := strs[s]; ok {
			return v
		}
		if len(strs) < 1<<16 {
			strs[s] = s
		}
		return s
	}
	idx := map[string]int{}
	var names []NameCount
	var prev time.Time
	bad := func(n int, reason string) {
		rep.Bad++
		if len(rep.BadLines) < maxBadLines {
			rep.BadLines = append(rep.BadLines, BadLine{n, reason})
		}
	}
	for sc.Scan() {
		rep.Lines++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var l logLine
		if !scanLine(text, &l) {
			l = logLine{}
			if err := json.Unmarshal(text, &l); err != nil {
				bad(rep.Lines, "not a JSON object: "+err.Error())
				continue
			}
		}
		e, reason := parseEntry(&l)
		if reason != "" {
			bad(rep.Lines, reason)
			continue
		}
		e.name, e.qtype = intern(e.name), intern(e.qtype)
		// The longest silence between entries in the file's order (the
		// log is written in time order; an entry out of order by less
		// than a second is the writer's doing, not a gap).
		if rep.Entries > 0 {
			if g := e.t.Sub(prev); g > rep.Gap {
				rep.Gap, rep.GapStart = g, prev
			}
		}
		if rep.Entries == 0 || e.t.After(prev) {
			prev = e.t
		}
		if rep.Entries == 0 || e.t.Before(rep.Start) {
			rep.Start = e.t
		}
		if rep.Entries == 0 || e.t.After(rep.End) {
			rep.End = e.t
		}
		rep.Entries++
		i, ok := idx[e.name]
		if !ok {
			i = len(names)
			idx[e.name] = i
			names = append(names, NameCount{Name: e.name})
		}
		names[i].Entries++
		names[i].Steered = names[i].Steered || e.pool
		if want == "" || e.name == want {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("from-log: line %d: %w", rep.Lines+1, err)
	}
	sort.Slice(names, func(i, j int) bool {
		if names[i].Entries != names[j].Entries {
			return names[i].Entries > names[j].Entries
		}
		return names[i].Name < names[j].Name
	})
	return out, names, nil
}

func parseEntry(l *logLine) (logEntry, string) {
	e := logEntry{scope: -1, ttl: -1}
	t, err := time.Parse(time.RFC3339Nano, l.Time)
	if err != nil {
		return e, fmt.Sprintf("time %q is not RFC 3339", l.Time)
	}
	e.t = t
	if e.client, err = netip.ParseAddr(l.Client); err != nil {
		return e, fmt.Sprintf("client %q is not an address", l.Client)
	}
	e.client = e.client.Unmap()
	if l.ECS != "" {
		p, err := netip.ParsePrefix(l.ECS)
		if err != nil {
			return e, fmt.Sprintf("ecs %q is not a prefix", l.ECS)
		}
		if p.Bits() > 0 { // source /0: the resolver asks for no tailoring (RFC 7871 §7.1.2)
			e.ecs = p.Masked()
		}
	}
	if l.Scope != nil {
		e.scope = *l.Scope
	}
	if l.Name == "" {
		return e, "no name"
	}
	e.name = canonical(l.Name)
	e.qtype = strings.ToUpper(l.Type)
	if e.qtype == "" {
		e.qtype = "A"
	}
	e.pool = l.Pool != ""
	if l.TTL != nil {
		e.ttl = *l.TTL
	}
	return e, ""
}

// typesText lists the query types counted, but skip, as "AAAA (12), HTTPS (3)".
func typesText(types map[string]int, skip string) string {
	var out []string
	for t, n := range types {
		if t != skip {
			out = append(out, fmt.Sprintf("%s (%d)", t, n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func canonical(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

func namesText(names []NameCount) string {
	var b strings.Builder
	for i, n := range names {
		if i == 10 {
			fmt.Fprintf(&b, ", and %d more", len(names)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d", n.Name, n.Entries)
		if n.Steered {
			b.WriteString(", steered")
		}
		b.WriteString(")")
	}
	return b.String()
}

func chooseRecord(want string, names []NameCount) (string, error) {
	if want != "" {
		w := canonical(want)
		for _, n := range names {
			if n.Name == w {
				return w, nil
			}
		}
		return "", fmt.Errorf("from-log: no entry for %s in the log; names seen: %s", w, namesText(names))
	}
	for _, n := range names { // most entries first
		if n.Steered {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("from-log: no steered name in the log (no entry has a pool): give --record; names seen: %s", namesText(names))
}

func badLinesText(bl []BadLine) string {
	var parts []string
	for _, b := range bl {
		parts = append(parts, fmt.Sprintf("line %d: %s", b.Line, b.Reason))
	}
	return strings.Join(parts, "; ")
}

// keyOf is the cache entry a miss fills.
type keyOf struct {
	res   netip.Addr
	block netip.Prefix
}

type keyData struct {
	times   []time.Time
	sources map[netip.Prefix]int
}

// blockOf is the ECS source masked to the returned scope (the source's
// own length when the scope is longer); invalid without ECS or without a
// returned scope (the answer then holds for every client of the resolver).
func blockOf(e *logEntry) netip.Prefix {
	if !e.ecs.IsValid() || e.scope < 0 {
		return netip.Prefix{}
	}
	bits := min(e.scope, e.ecs.Bits())
	p, _ := e.ecs.Addr().Prefix(bits)
	return p
}

// infer fills rep.Keys and rep.Resolvers.
func infer(mine []logEntry, rep *LogReport) {
	keys := map[keyOf]*keyData{}
	var order []keyOf
	type resData struct {
		keys       []keyOf
		ecs        bool
		src4, src6 map[int]int
	}
	res := map[netip.Addr]*resData{}
	var resOrder []netip.Addr
	for i := range mine {
		e := &mine[i]
		k := keyOf{e.client, blockOf(e)}
		kd := keys[k]
		if kd == nil {
			kd = &keyData{sources: map[netip.Prefix]int{}}
			keys[k] = kd
			order = append(order, k)
		}
		kd.times = append(kd.times, e.t)
		if e.ecs.IsValid() {
			kd.sources[e.ecs]++
		}
		rd := res[e.client]
		if rd == nil {
			rd = &resData{src4: map[int]int{}, src6: map[int]int{}}
			res[e.client] = rd
			resOrder = append(resOrder, e.client)
		}
		if e.ecs.IsValid() {
			rd.ecs = true
			if e.ecs.Addr().Is4() {
				rd.src4[e.ecs.Bits()]++
			} else {
				rd.src6[e.ecs.Bits()]++
			}
		}
	}
	for _, k := range order {
		res[k.res].keys = append(res[k.res].keys, k)
	}
	span := rep.Span.Seconds()
	T := rep.TTL.Seconds()
	w := pairWindow * T
	for _, a := range resOrder {
		rd := res[a]
		lr := LogResolver{Addr: a, Keys: len(rd.keys), ECS: rd.ecs, SourceV4: mode(rd.src4), SourceV6: mode(rd.src6)}
		// Pairs of misses of one key closer than w, and what (k−1)/k = 1
		// would give: Σ n·m·w with m the observed miss rate.
		denom := 0.0
		maxWin := 1
		for _, k := range rd.keys {
			ts := keys[k].times
			sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
			n := len(ts)
			denom += float64(n) * float64(n) / span * w
			j := 0
			for i := range ts {
				if j < i+1 {
					j = i + 1
				}
				for j < n && ts[j].Sub(ts[i]).Seconds() < w {
					j++
				}
				lr.Pairs += j - i - 1
				maxWin = max(maxWin, j-i)
			}
		}
		lr.Caches = 1
		if denom > 0 {
			lr.Ratio = float64(lr.Pairs) / denom
		}
		// Three pairs at least before claiming a second cache: a lone
		// pair is as likely a resolver restart or a clock step.
		if lr.Pairs >= 3 {
			if lr.Ratio < 1-1.0/maxCaches {
				lr.Caches = int(math.Round(1 / (1 - lr.Ratio)))
			} else {
				lr.Caches = maxWin
			}
			lr.Caches = max(1, min(lr.Caches, maxCaches))
		}
		rep.Resolvers = append(rep.Resolvers, lr)
	}
	resIdx := map[netip.Addr]int{}
	for i, lr := range rep.Resolvers {
		resIdx[lr.Addr] = i
	}
	for _, k := range order {
		kd := keys[k]
		lr := &rep.Resolvers[resIdx[k.res]]
		n := len(kd.times)
		m := float64(n) / (rep.Sample * span)
		kk := float64(lr.Caches)
		lk := LogKey{Resolver: k.res, Block: k.block, Sources: len(kd.sources), Misses: n, Span: rep.Span, MissRate: m, Caches: lr.Caches}
		if m*T/kk >= satThreshold {
			lk.Saturated = true
			lk.Rate = satThreshold / (1 - satThreshold) * kk / T
		} else {
			lk.Rate = m / (1 - m*T/kk)
		}
		rep.Keys = append(rep.Keys, lk)
		rep.Misses += n
		rep.MissRate += m
		rep.UserRate += lk.Rate
		if lk.Saturated {
			rep.Saturated++
		}
		if k.block.IsValid() {
			rep.ECSKeys++
		}
	}
}

func mode(c map[int]int) int {
	best := 0
	for v, n := range c {
		if n > c[best] || (n == c[best] && v > best) {
			best = v
		}
	}
	return best
}

// siteKey is what makes resolvers one site: without ECS, their /24 (/48)
// and number of caches; with ECS, the address itself.
type siteKey struct {
	net    netip.Prefix
	ecs    bool
	caches int
}

// usersPrefix is the subnet the users of a resolver without ECS are
// modelled as: the resolver's own /24 (/56).
func usersPrefix(a netip.Addr) netip.Prefix {
	bits := 24
	if a.Is6() {
		bits = 56
	}
	p, _ := a.Prefix(bits)
	return p
}

func siteNet(a netip.Addr) netip.Prefix {
	bits := 24
	if a.Is6() {
		bits = 48
	}
	p, _ := a.Prefix(bits)
	return p
}

func siteName(p netip.Prefix) string {
	return fmt.Sprintf("res-%s-%d", p.Addr(), p.Bits())
}

func lessPrefix(a, b netip.Prefix) bool {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c < 0
	}
	return a.Bits() < b.Bits()
}

// buildScenario turns the keys into client groups and resolver sites.
//
// Resolvers without ECS are grouped into one site per /24 (/48) and
// number of caches, with one client group per resolver (its users, at
// its own /24 or /56, with its rate): Compile deals a site's subnets to
// its resolvers in turn, so resolver i serves group i. A resolver with
// ECS is a site of its own, its client groups the ECS sources it sent
// (in rate classes a factor of 4 apart, as a group weights its subnets
// equally): one site per address keeps each ECS block with the resolver
// whose cache held it (a site's subnets are dealt to its resolvers in
// turn, which would split a block over several). A source seen from
// several resolvers is in each one's group with the rate that one carried.
func buildScenario(rep *LogReport, mine []logEntry) *Scenario {
	type site struct {
		key    siteKey
		name   string
		addrs  []netip.Addr
		src4   int
		src6   int
		groups []string
	}
	var sites []*site
	byKey := map[siteKey]*site{}
	resSite := map[netip.Addr]*site{}
	for _, lr := range rep.Resolvers {
		sk := siteKey{net: siteNet(lr.Addr), caches: lr.Caches}
		if lr.ECS {
			sk = siteKey{net: netip.PrefixFrom(lr.Addr, lr.Addr.BitLen()), ecs: true, caches: lr.Caches}
		}
		s := byKey[sk]
		if s == nil {
			s = &site{key: sk, src4: lr.SourceV4, src6: lr.SourceV6}
			byKey[sk] = s
			sites = append(sites, s)
		}
		s.addrs = append(s.addrs, lr.Addr)
		resSite[lr.Addr] = s
	}
	for _, s := range sites {
		sort.Slice(s.addrs, func(i, j int) bool { return s.addrs[i].Less(s.addrs[j]) })
	}
	sort.Slice(sites, func(i, j int) bool {
		a, b := sites[i], sites[j]
		if c := a.addrs[0].Compare(b.addrs[0]); c != 0 {
			return c < 0
		}
		return a.key.caches < b.key.caches
	})
	// Names: the /24 (/48) when it holds one site; else the behaviour
	// is appended ("-ecs24", "-noecs", "-k3"), and an ECS resolver that
	// shares its /24 with other ECS resolvers is named by its address.
	type netKind struct {
		net netip.Prefix
		ecs bool
	}
	perNet := map[netip.Prefix]int{}
	perKind := map[netKind]int{}
	for _, s := range sites {
		n := siteNet(s.addrs[0])
		perNet[n]++
		perKind[netKind{n, s.key.ecs}]++
	}
	for _, s := range sites {
		n := siteNet(s.addrs[0])
		s.name = siteName(n)
		switch {
		case perNet[n] == 1:
		case s.key.ecs && perKind[netKind{n, true}] > 1:
			s.name = "res-" + s.addrs[0].String()
		case s.key.ecs:
			s.name += fmt.Sprintf("-ecs%d", max(s.src4, s.src6))
		default:
			s.name += "-noecs"
			if perKind[netKind{n, false}] > 1 {
				s.name += fmt.Sprintf("-k%d", s.key.caches)
			}
		}
	}
	for i := range rep.Resolvers {
		rep.Resolvers[i].Site = resSite[rep.Resolvers[i].Addr].name
	}
	for i := range rep.Keys {
		rep.Keys[i].Site = resSite[rep.Keys[i].Resolver].name
	}

	// Per resolver, the users' subnets and their rates: a key's λ̂ split
	// over the ECS sources seen in its block in proportion to their
	// misses (the first query after an expiry comes from each subnet in
	// proportion to its rate); without ECS, the resolver's /24 (/56).
	srcMisses := map[keyOf]map[netip.Prefix]int{}
	for i := range mine {
		e := &mine[i]
		k := keyOf{e.client, blockOf(e)}
		if srcMisses[k] == nil {
			srcMisses[k] = map[netip.Prefix]int{}
		}
		p := e.ecs
		if !p.IsValid() {
			p = usersPrefix(e.client)
		}
		srcMisses[k][p]++
	}
	resRates := map[netip.Addr]map[netip.Prefix]float64{}
	for _, lk := range rep.Keys {
		if resRates[lk.Resolver] == nil {
			resRates[lk.Resolver] = map[netip.Prefix]float64{}
		}
		for p, n := range srcMisses[keyOf{lk.Resolver, lk.Block}] {
			resRates[lk.Resolver][p] += lk.Rate * float64(n) / float64(lk.Misses)
		}
	}

	sc := &Scenario{
		Duration: Duration(roundUp(rep.Span, time.Minute)),
		Bin:      Duration(time.Minute),
		Record:   strings.TrimSuffix(rep.Record, "."),
		Type:     rep.Type,
	}
	for _, s := range sites {
		if !s.key.ecs {
			// One group per resolver, in address order (resolver i of
			// the site serves the site's i-th subnet).
			for _, a := range s.addrs {
				g := ClientGroup{Name: "users-" + s.name}
				if len(s.addrs) > 1 {
					g.Name = "users-" + a.String()
				}
				for p, r := range resRates[a] {
					g.Prefixes = append(g.Prefixes, p.String())
					g.Rate += r
				}
				sc.Clients = append(sc.Clients, g)
				s.groups = append(s.groups, g.Name)
			}
			continue
		}
		rates := resRates[s.addrs[0]]
		classes := map[int][]netip.Prefix{}
		for p, r := range rates {
			c := int(math.Floor(math.Log(r) / math.Log(4)))
			classes[c] = append(classes[c], p)
		}
		var cs []int
		for c := range classes {
			cs = append(cs, c)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(cs)))
		for i, c := range cs {
			ps := classes[c]
			sort.Slice(ps, func(i, j int) bool { return lessPrefix(ps[i], ps[j]) })
			g := ClientGroup{Name: "users-" + s.name}
			if len(cs) > 1 {
				g.Name += fmt.Sprintf("-%d", i+1)
			}
			for _, p := range ps {
				g.Prefixes = append(g.Prefixes, p.String())
				g.Rate += rates[p]
			}
			sc.Clients = append(sc.Clients, g)
			s.groups = append(s.groups, g.Name)
		}
	}
	for _, s := range sites {
		one := 1.0
		rs := ResolverSite{Name: s.name, Share: &one, Groups: s.groups, Address: s.addrs[0].String()}
		if len(s.addrs) > 1 {
			rs.Count = len(s.addrs)
		}
		if s.key.caches > 1 {
			rs.Caches = s.key.caches
		}
		if s.key.ecs {
			honors := true // assumed: the log cannot tell (see the report)
			rs.ECS = &ECSSpec{Enabled: true, V4: s.src4, V6: s.src6, HonorsScope: &honors}
		}
		sc.Resolvers = append(sc.Resolvers, rs)
	}
	rep.Sites = len(sc.Resolvers)
	rep.Groups = len(sc.Clients)
	sort.SliceStable(rep.Keys, func(i, j int) bool { return rep.Keys[i].Rate > rep.Keys[j].Rate })
	return sc
}

func roundUp(d, unit time.Duration) time.Duration {
	n := (d + unit - 1) / unit
	return max(n, 1) * unit
}

// notes fills rep.Unknown.
func notes(rep *LogReport, mine []logEntry, o FromLogOptions) {
	anyECS, noECS := false, 0
	for _, r := range rep.Resolvers {
		if r.ECS {
			anyECS = true
		} else {
			noECS++
		}
	}
	switch {
	case !anyECS:
		rep.Unknown = append(rep.Unknown, "no ECS fields in the log: every resolver's users are modelled as one subnet at the resolver's address (its /24 or /56); the split between clients behind one resolver is unknown")
	case noECS > 0:
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s no ECS: their users are modelled as one subnet at the resolver's address (its /24 or /56); the split between clients behind one resolver is unknown", plural(noECS, "resolver sends", "resolvers send")))
	}
	if anyECS {
		rep.Unknown = append(rep.Unknown, "whether ECS resolvers honour the returned scope cannot be seen: assumed they do (a resolver caching per source prefix would look like more caches)")
		noScope := 0
		for _, e := range mine {
			if e.ecs.IsValid() && e.scope < 0 {
				noScope++
			}
		}
		if noScope > 0 {
			rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s with ECS got no scope back: each is counted as one entry for all of its resolver's users", plural(noScope, "entry", "entries")))
		}
	}
	if rep.Saturated > 0 {
		sat := map[netip.Addr]bool{}
		for _, k := range rep.Keys {
			if k.Saturated {
				sat[k.Resolver] = true
			}
		}
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s saturated (%s with miss rate × TTL ≥ %.1f per cache): their rates are lower bounds (9 × caches / TTL)", plural(len(sat), "resolver", "resolvers"), plural(rep.Saturated, "key", "keys"), satThreshold))
	}
	few := 0
	for _, k := range rep.Keys {
		if k.Misses < 3 {
			few++
		}
	}
	if few > 0 {
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s fewer than 3 misses: their rates are rough", plural(few, "key has", "keys have")))
	}
	multi := 0
	for _, r := range rep.Resolvers {
		if r.Caches > 1 {
			multi++
		}
	}
	if multi > 0 {
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("%s several caches; a TTL clamp below %.0f %% of the TTL would look the same", plural(multi, "resolver shows", "resolvers show"), pairWindow*100))
	}
	if T := rep.TTL; rep.Gap > rep.Span/10 && rep.Gap > 10*T {
		rep.Unknown = append(rep.Unknown, fmt.Sprintf("the log is silent for %s from %s (%.0f %% of its span): if the node was down or a rotated file is missing, the rates, averaged over the whole span, are too low", rep.Gap.Round(time.Second), rep.GapStart.UTC().Format(time.RFC3339), 100*rep.Gap.Seconds()/rep.Span.Seconds()))
	}
	if o.Sample == 0 {
		rep.Unknown = append(rep.Unknown, "the sample rate is not in the log: assumed every query was logged (give --sample if query_log.sample was below 1)")
	}
	rep.Unknown = append(rep.Unknown, "the users' rates are constant over the log's span (no diurnal profile is inferred), and no TTL violators are assumed")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Text is the report as a page of text: the log, the record, the keys
// (the busiest 30), the totals, and what could not be inferred.
func (r *LogReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "query log: %s, %s parsed", plural(r.Lines, "line", "lines"), plural(r.Entries, "entry", "entries"))
	if r.Bad > 0 {
		fmt.Fprintf(&b, ", %d unparseable (%s", r.Bad, badLinesText(r.BadLines))
		if r.Bad > len(r.BadLines) {
			fmt.Fprintf(&b, "; and %d more", r.Bad-len(r.BadLines))
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if !r.Start.IsZero() {
		fmt.Fprintf(&b, "span:      %s to %s (%s)\n", r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.Span.Round(time.Second))
	}
	if r.Record == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "record:    %s %s, %s entries; TTL %s (%s); sample %g\n", r.Record, r.Type, strconv.Itoa(r.RecordEntries), r.TTL, r.TTLFrom, r.Sample)
	fmt.Fprintf(&b, "keys:      %d (%d with an ECS block) from %s, in %s and %s\n", len(r.Keys), r.ECSKeys, plural(len(r.Resolvers), "resolver", "resolvers"), plural(r.Sites, "site", "sites"), plural(r.Groups, "client group", "client groups"))
	b.WriteString("\n")
	fmt.Fprintf(&b, "%-28s %-20s %7s %10s %10s %6s  %s\n", "resolver", "ecs block", "misses", "miss/s", "users q/s", "caches", "")
	for i, k := range r.Keys {
		if i == 30 {
			fmt.Fprintf(&b, "... and %d more keys\n", len(r.Keys)-30)
			break
		}
		block := "-"
		if k.Block.IsValid() {
			block = k.Block.String()
			if k.Sources > 1 {
				block += fmt.Sprintf(" (%d)", k.Sources)
			}
		}
		flag, rate := "", fmt.Sprintf("%.4g", k.Rate)
		if k.Saturated {
			flag, rate = "saturated", "≥"+rate
		}
		fmt.Fprintf(&b, "%-28s %-20s %7d %10.4g %10s %6d  %s\n", k.Resolver, block, k.Misses, k.MissRate, rate, k.Caches, flag)
	}
	// Per site, as population.yaml has them, busiest first.
	type siteSum struct {
		name                    string
		resolvers, keys, misses int
		missRate, users         float64
		caches, saturated       int
		ecs                     bool
	}
	var sums []*siteSum
	byName := map[string]*siteSum{}
	for _, lr := range r.Resolvers {
		s := byName[lr.Site]
		if s == nil {
			s = &siteSum{name: lr.Site, caches: lr.Caches, ecs: lr.ECS}
			byName[lr.Site] = s
			sums = append(sums, s)
		}
		s.resolvers++
	}
	for _, k := range r.Keys {
		if s := byName[k.Site]; s != nil {
			s.keys++
			s.misses += k.Misses
			s.missRate += k.MissRate
			s.users += k.Rate
			if k.Saturated {
				s.saturated++
			}
		}
	}
	sort.SliceStable(sums, func(i, j int) bool { return sums[i].users > sums[j].users })
	fmt.Fprintf(&b, "\n%-28s %9s %6s %6s %4s %10s %10s\n", "site", "resolvers", "keys", "caches", "ecs", "miss/s", "users q/s")
	for i, s := range sums {
		if i == 30 {
			fmt.Fprintf(&b, "... and %d more sites\n", len(sums)-30)
			break
		}
		ecs, users := "no", fmt.Sprintf("%.4g", s.users)
		if s.ecs {
			ecs = "yes"
		}
		if s.saturated > 0 {
			users = "≥" + users
		}
		fmt.Fprintf(&b, "%-28s %9d %6d %6d %4s %10.4g %10s\n", s.name, s.resolvers, s.keys, s.caches, ecs, s.missRate, users)
	}
	fmt.Fprintf(&b, "\ntotal:     %d misses, %.4g misses/s, users %.4g q/s", r.Misses, r.MissRate, r.UserRate)
	if r.Saturated > 0 {
		fmt.Fprintf(&b, " (at least: %s saturated)", plural(r.Saturated, "key", "keys"))
	}
	b.WriteString("\n")
	if len(r.Unknown) > 0 {
		b.WriteString("\ncould not infer:\n")
		for _, u := range r.Unknown {
			fmt.Fprintf(&b, "  - %s\n", u)
		}
	}
	return b.String()
}
