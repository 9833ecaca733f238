package node

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/traffic"
)

// The dashboard's reads (api.DashboardBackend): the overview of every
// steered record and its pools, one record's detail, and the events that
// say the overview changed.
//
// Cost: a page of the overview walks every record once for the filter
// and the state counts (no allocation per record), and builds the page's
// records only. What depends on the served table alone (records sorted by
// name, pool locations, which pools no rule names) is computed once per
// table (dashIndex) on the first request that needs it.

// The windows the overview's shares cover.
const (
	window5m = 5 * time.Minute
	window1h = time.Hour
)

// dashboard is the node's dashboard state: the per-table index and the
// event subscribers. Its zero value is ready.
type dashboard struct {
	idx atomic.Pointer[dashIndex]

	mu     sync.Mutex
	subs   map[chan api.Event]struct{}
	hooked bool // the health manager's OnChange calls notify
}

// dashTraffic is the node's traffic recorder (nil: every count reads 0).
func (n *Node) dashTraffic() *traffic.Recorder { return n.Traffic() }

// dashIndex is what the dashboard computes once per served table.
type dashIndex struct {
	t *policy.Table
	// order is the records' indexes sorted by name.
	order []int32
	// per record index: the named policy, and per pool its location (nil:
	// unknown) and how the rules refer to it.
	policy []string
	loc    [][]*api.LatLon
	static [][]poolRole
	src    []int // index in the configuration's records (-1: unknown)
}

// poolRole is how a record's rules refer to one pool.
type poolRole struct {
	named bool // some action of a rule's tree names it
	// onlyStandby: every action naming it is a failover where it is not
	// the first member; standbyOf lists the members before it.
	onlyStandby bool
	standbyOf   []int
	// onlyWeight0: every action naming it is a split giving it weight 0.
	onlyWeight0 bool
}

func (n *Node) dashSnapshot() (*snapshot.Snapshot, *dashIndex) {
	snap := n.srv.Handler().Snapshot()
	if snap == nil || snap.Policies == nil {
		return snap, nil
	}
	if x := n.dash.idx.Load(); x != nil && x.t == snap.Policies {
		return snap, x
	}
	x := buildDashIndex(snap)
	n.dash.idx.Store(x)
	return snap, x
}

func buildDashIndex(snap *snapshot.Snapshot) *dashIndex {
	t := snap.Policies
	x := &dashIndex{t: t, order: make([]int32, len(t.Records)), policy: make([]string, len(t.Records)),
		loc: make([][]*api.LatLon, len(t.Records)), static: make([][]poolRole, len(t.Records)), src: make([]int, len(t.Records))}
	for i := range x.order {
		x.order[i] = int32(i)
		x.src[i] = -1
	}
	sort.Slice(x.order, func(i, j int) bool { return t.Records[x.order[i]].Name < t.Records[x.order[j]].Name })
	if cfg := snap.Config; cfg != nil {
		for ci := range cfg.Records {
			cr := &cfg.Records[ci]
			if r := t.Get(dns.CanonicalName(cr.Name)); r != nil && r.Index < len(x.src) {
				x.src[r.Index] = ci
				x.policy[r.Index] = cr.Policy
			}
		}
	}
	// A pool without a configured location is placed where the geo
	// databases put its first address, when one has coordinates for it (a
	// City database; a country's centroid is no place for a site).
	city := snap.Geo != nil && len(snap.Geo.DBs) > 0
	geoLoc := map[netip.Addr]*api.LatLon{}
	for i, r := range t.Records {
		x.loc[i] = make([]*api.LatLon, len(r.Pools))
		for _, p := range r.Pools {
			switch {
			case p.HasLoc:
				x.loc[i][p.Index] = &api.LatLon{Lat: p.Lat, Lon: p.Lon}
			case city:
				addrs := p.Addrs()
				if len(addrs) == 0 {
					continue
				}
				a := addrs[0]
				ll, ok := geoLoc[a]
				if !ok {
					if info, _, err := snap.Geo.LookupInfo(a); err == nil && info.HasLocation && !info.LocationIsCentroid {
						ll = &api.LatLon{Lat: info.Lat, Lon: info.Lon}
					}
					geoLoc[a] = ll
				}
				x.loc[i][p.Index] = ll
			}
		}
		x.static[i] = poolRoles(r)
	}
	return x
}

// actionMembers lists the members an action may answer with.
func actionMembers(a *policy.Action) []int {
	if len(a.Candidates) == 0 {
		return a.Pools
	}
	out := append([]int(nil), a.Candidates...)
	for _, m := range a.Pools {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// poolRoles says how r's rules (and the groups they reach) refer to each
// pool.
func poolRoles(r *policy.Record) []poolRole {
	roles := make([]poolRole, len(r.Pools))
	for i := range roles {
		roles[i].onlyStandby, roles[i].onlyWeight0 = true, true
	}
	seen := map[int]bool{}
	var walk func(a *policy.Action, depth int)
	walk = func(a *policy.Action, depth int) {
		if depth > policy.MaxDepth+1 {
			return
		}
		for i, m := range actionMembers(a) {
			if m >= len(r.Pools) {
				g := m - len(r.Pools)
				if g < len(r.Groups) && !seen[m] {
					seen[m] = true
					walk(&r.Groups[g].Action, depth+1)
				}
				continue
			}
			role := &roles[m]
			role.named = true
			if a.Kind == policy.ActFailover && i > 0 {
				for _, prev := range a.Pools[:i] {
					if !slices.Contains(role.standbyOf, prev) {
						role.standbyOf = append(role.standbyOf, prev)
					}
				}
			} else {
				role.onlyStandby = false
			}
			if !(a.Kind == policy.ActSplit && i < len(a.Weights) && a.Weights[i] == 0) {
				role.onlyWeight0 = false
			}
		}
	}
	for _, rule := range r.Rules {
		walk(&rule.Action, 1)
	}
	for i := range roles {
		if !roles[i].named {
			roles[i].onlyStandby, roles[i].onlyWeight0 = false, false
		}
	}
	return roles
}

// Overview implements api.DashboardBackend.
func (b *backend) Overview(q api.OverviewQuery) (api.Overview, error) { return b.n.Overview(q) }

// Overview describes one page of the steered records matching q.
func (n *Node) Overview(q api.OverviewQuery) (api.Overview, error) {
	now := time.Now()
	snap, x := n.dashSnapshot()
	ov := api.Overview{Generated: now.UTC(), Offset: q.Offset, Records: []api.OverviewRecord{}, Map: []api.MapPoint{},
		States: map[string]int{"up": 0, "down": 0, "drain": 0, "disabled": 0}}
	ov.Node = nodeStatus(snap)
	w5, w1 := n.windows()
	ov.Covered5m, ov.Covered1h = coverage(w5), coverage(w1)
	if w5 != nil && w5.Nodes > 1 {
		ov.Fleet, ov.FleetNodes = true, w5.Nodes
	}
	if x == nil {
		ov.Map = n.nodePoints(snap, ov.Map)
		return ov, nil
	}
	if q.Limit <= 0 {
		q.Limit = api.DefaultOverviewLimit
	}
	filter := strings.ToLower(strings.TrimSpace(q.Filter))
	live := snap.Live
	page := make([]*policy.Record, 0, min(q.Limit, len(x.order)))
	var up, down, drain, disabled int
	for _, ri := range x.order {
		r := x.t.Records[ri]
		has := q.State == ""
		for _, p := range r.Pools {
			s := live.PoolStateWord(r, p)
			switch s {
			case "up":
				up++
			case "down":
				down++
			case "drain":
				drain++
			case "disabled":
				disabled++
			}
			if s == q.State {
				has = true
			}
		}
		if !has || filter != "" && !strings.Contains(r.Name, filter) {
			continue
		}
		if ov.Total >= q.Offset && len(page) < q.Limit {
			page = append(page, r)
		}
		ov.Total++
	}
	ov.States["up"], ov.States["down"], ov.States["drain"], ov.States["disabled"] = up, down, drain, disabled
	states := n.hc.manager
	for _, r := range page {
		ov.Records = append(ov.Records, n.overviewRecord(snap, x, r, w5, w1, states, now))
	}
	ov.Map = poolPoints(ov.Records, ov.Map)
	ov.Map = n.nodePoints(snap, ov.Map)
	return ov, nil
}

func (n *Node) windows() (w5, w1 *traffic.Window) {
	rec := n.dashTraffic()
	if rec == nil {
		return nil, nil
	}
	return rec.Window(window5m), rec.Window(window1h)
}

// coverage says how much of its span a window covers.
func coverage(w *traffic.Window) string {
	if w == nil {
		return "0s"
	}
	return w.Covered.Round(time.Second).String()
}

func counts(w *traffic.Window, name string) traffic.Counts {
	if w == nil {
		return traffic.Counts{}
	}
	c, _ := w.Record(name)
	return c
}

func nodeStatus(snap *snapshot.Snapshot) *api.NodeStatus {
	if snap == nil || snap.Config == nil || snap.Config.Node == nil {
		return nil
	}
	nd := snap.Config.Node
	ns := &api.NodeStatus{Name: nd.Name, Region: nd.Region, Country: nd.Country, UnknownClient: snap.Config.ECS.UnknownClient}
	if l := nd.Location; l != nil {
		lat, lon := l.Lat, l.Lon
		ns.Lat, ns.Lon = &lat, &lon
	}
	return ns
}

// overviewRecord describes r: its pools' states, shares and why a pool
// gets no traffic.
func (n *Node) overviewRecord(snap *snapshot.Snapshot, x *dashIndex, r *policy.Record, w5, w1 *traffic.Window, m *health.Manager, now time.Time) api.OverviewRecord {
	live := snap.Live
	c5, c1 := counts(w5, r.Name), counts(w1, r.Name)
	or := api.OverviewRecord{Name: r.Name, Type: dns.TypeToString[r.Type], TTL: r.TTL, Policy: x.policy[r.Index],
		Answers5m: c5.Answers, Answers1h: c1.Answers, Pools: make([]api.OverviewPool, 0, len(r.Pools))}
	for _, p := range r.Pools {
		state, why, ovr := live.PoolState(r, p)
		op := api.OverviewPool{Name: p.Name, State: state, Reason: why, Override: ovr,
			Answers5m: c5.Pools[p.Name], Answers1h: c1.Pools[p.Name], LastAnswered: live.LastAnswered(r, p.Index).UTC(),
			Location: x.loc[r.Index][p.Index]}
		if pl, ok := live.PoolLoad(r, p); ok {
			op.Capacity = pl.Reason()
		}
		if c5.Answers > 0 {
			op.Share5m = float64(op.Answers5m) / float64(c5.Answers)
		}
		if c1.Answers > 0 {
			op.Share1h = float64(op.Answers1h) / float64(c1.Answers)
		}
		if o, exp, ok := m.PoolOverride(r.Name, p.Name); ok {
			if !exp.IsZero() {
				e := exp.UTC()
				op.Expires = &e
			}
			if o == health.OverrideDrain {
				safe := live.DrainSafe(r, p.Index, now)
				op.DrainSafe = &safe
			}
		}
		// Targets: each address's health (the check's, or an override).
		var latestMatch time.Time
		var downWhy []string
		addrs := p.Addrs()
		op.Targets = len(addrs)
		for _, a := range addrs {
			k := health.Key{Addr: a, Check: p.Check}
			if m.Usable(k) {
				op.TargetsUp++
			}
			if p.Check == "" {
				continue
			}
			st, ok := m.State(k)
			if !ok {
				continue
			}
			if (st.Status == health.Down) == (state == "down") && st.Since.After(latestMatch) {
				latestMatch = st.Since
			}
			if st.Status == health.Down && len(downWhy) < 3 {
				r := st.Reason
				if r == "" {
					r = "down"
				}
				downWhy = append(downWhy, a.String()+": "+r)
			}
		}
		if state == "down" && !ovr && p.Check != "" {
			// The checks' own words beat "fewer than N pass".
			op.Reason = fmt.Sprintf("%d of %d up (min_up %d)", op.TargetsUp, op.Targets, p.MinUp)
			if len(downWhy) > 0 {
				op.Reason = strings.Join(downWhy, "; ") + "; " + op.Reason
			}
		}
		op.Since = snap.Loaded.UTC() // unless the health wiring saw it
		if since, first, ok := n.hc.poolSince(r.Name, p.Name); ok {
			op.Since = since.UTC()
			if first && !ovr && !latestMatch.IsZero() && state != "disabled" {
				// Seen first at the start: the checks (restored from the
				// state file) know better when it became so.
				op.Since = latestMatch.UTC()
			}
		}
		if op.Answers5m == 0 {
			op.NoTraffic = noTraffic(r, p, state, op.Reason, x.static[r.Index][p.Index], live, c5.Answers)
		}
		or.Pools = append(or.Pools, op)
	}
	return or
}

// noTraffic says why pool p of r had no answers in the last 5 minutes;
// answers is the record's answers then.
func noTraffic(r *policy.Record, p *policy.Pool, state, reason string, role poolRole, live *policy.Live, answers uint64) string {
	switch state {
	case "down":
		return "down: " + reason
	case "drain":
		return "drained"
	case "disabled":
		return "disabled"
	}
	if !role.named {
		return "excluded by policy: no rule selects it"
	}
	if role.onlyStandby {
		up := live.Up(r, dns.TypeA) | live.Up(r, dns.TypeAAAA)
		for _, m := range role.standbyOf {
			if m < len(r.Pools) && up&(1<<m) != 0 {
				return "failover standby: " + r.Pools[m].Name + " up"
			}
		}
	}
	if role.onlyWeight0 {
		return "weight 0"
	}
	if answers == 0 {
		return "no queries for the record in 5 minutes"
	}
	return "not chosen by any client seen"
}

// stateRank orders states from best to worst for a map point.
var stateRank = map[string]int{"up": 0, "disabled": 1, "drain": 2, "down": 3}

// poolPoints appends one map point per distinct pool location of recs.
func poolPoints(recs []api.OverviewRecord, out []api.MapPoint) []api.MapPoint {
	at := map[api.LatLon]int{}
	for _, r := range recs {
		for _, p := range r.Pools {
			if p.Location == nil {
				continue
			}
			k := api.LatLon{Lat: math.Round(p.Location.Lat*100) / 100, Lon: math.Round(p.Location.Lon*100) / 100}
			i, ok := at[k]
			if !ok {
				i = len(out)
				at[k] = i
				out = append(out, api.MapPoint{Kind: "pool", Label: p.Name, LatLon: *p.Location, State: p.State})
			}
			pt := &out[i]
			pt.Pools = append(pt.Pools, r.Name+"/"+p.Name)
			if stateRank[p.State] > stateRank[pt.State] {
				pt.State = p.State
			}
			if !slices.Contains(strings.Split(pt.Label, ", "), p.Name) {
				pt.Label += ", " + p.Name
			}
		}
	}
	return out
}

// nodePoints appends the answering node's point (when its location is
// configured) or, in a fleet, every node's with a location.
func (n *Node) nodePoints(snap *snapshot.Snapshot, out []api.MapPoint) []api.MapPoint {
	if n.fl != nil {
		return append(out, (&backend{n: n}).fleetNodes()...)
	}
	if ns := nodeStatus(snap); ns != nil && ns.Lat != nil && ns.Lon != nil {
		out = append(out, api.MapPoint{Kind: "node", Label: ns.Name, LatLon: api.LatLon{Lat: *ns.Lat, Lon: *ns.Lon}, State: "up"})
	}
	return out
}

// Subscribe implements api.DashboardBackend.
func (b *backend) Subscribe(ctx context.Context) (<-chan api.Event, func()) {
	ch, cancel := b.n.dash.subscribe(b.n)
	stop := context.AfterFunc(ctx, cancel) // the end of ctx cancels too
	return ch, func() { stop(); cancel() }
}

func (d *dashboard) subscribe(n *Node) (<-chan api.Event, func()) {
	ch := make(chan api.Event, 1)
	d.mu.Lock()
	if d.subs == nil {
		d.subs = map[chan api.Event]struct{}{}
	}
	d.subs[ch] = struct{}{}
	d.mu.Unlock()
	d.hook(n)
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			d.mu.Lock()
			delete(d.subs, ch)
			d.mu.Unlock()
		})
	}
}

// hook makes every change of health (checks, overrides) notify the
// subscribers, once: after the health wiring's own OnChange (registered
// first) has applied it to the served table.
func (d *dashboard) hook(n *Node) {
	d.mu.Lock()
	if d.hooked || n.hc == nil {
		d.mu.Unlock()
		return
	}
	d.hooked = true
	d.mu.Unlock()
	n.hc.manager.OnChange(func() { d.notify("health") })
}

// notify tells every subscriber that kind changed, dropping the value for
// one that has not taken the last (it only says "changed").
func (d *dashboard) notify(kind string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.subs) == 0 {
		return
	}
	ev := api.Event{Kind: kind, At: time.Now().UTC()}
	for ch := range d.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// recordConfig returns the lines of the configuration's record ci (and
// of its named policy) and where they start. It reads only as far into
// the configuration's text as those lines: a page of one record costs
// what precedes it, not a split of a configuration of thousands.
func recordConfig(cfg *config.Config, ci int) (text string, line int) {
	if cfg == nil || ci < 0 || ci >= len(cfg.Records) {
		return "", 0
	}
	line = cfg.Records[ci].Line
	text = block(cfg.Text(), line)
	if p := cfg.Records[ci].Policy; p != "" {
		if pl := cfg.Line("policies." + p); pl > 0 {
			text += fmt.Sprintf("\n# policies.%s (line %d)\n", p, pl) + block(cfg.Text(), pl)
		}
	}
	return text, line
}

// block returns the YAML block of text starting at line (1-based): that
// line and every following one indented deeper than it (or blank),
// trailing blank lines dropped. A sequence item ("- name: x") counts its
// dash's column.
func block(text string, line int) string {
	if line < 1 {
		return ""
	}
	for range line - 1 { // skip to the line
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			return ""
		}
		text = text[i+1:]
	}
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	nextLine := func(s string) (l, rest string, ok bool) {
		if s == "" {
			return "", "", false
		}
		l, rest, _ = strings.Cut(s, "\n")
		return l, rest, true
	}
	first, rest, ok := nextLine(text)
	if !ok {
		return ""
	}
	base := indent(first)
	end := len(first) // bytes of text in the block, its last non-blank line included
	for pos := len(first) + 1; ; {
		l, r, ok := nextLine(rest)
		if !ok || strings.TrimSpace(l) != "" && indent(l) <= base {
			break
		}
		if strings.TrimSpace(l) != "" {
			end = pos + len(l)
		}
		pos += len(l) + 1
		rest = r
	}
	return text[:end] + "\n"
}
