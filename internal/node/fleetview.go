package node

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Fleet implements api.DashboardBackend's Fleet: every live node of the
// fleet (bundle digest, view age, health mode, errors) and every health
// target with each observer's latest observation and the fleet's verdict,
// as this node sees them now (copies of what its member keeps, no read
// of the store). ErrNotFound off a fleet.
func (b *backend) Fleet() (api.FleetView, error) {
	fl := b.n.fl
	if fl == nil {
		return api.FleetView{}, fmt.Errorf("this node is in no fleet: %w", api.ErrNotFound)
	}
	now := time.Now()
	v := fl.View(now)
	out := api.FleetView{Node: v.Node, Prefix: v.Prefix, Errors: v.Errors, Warnings: v.Warnings,
		Nodes: make([]api.FleetNodeView, 0, len(v.Nodes)), Targets: make([]api.FleetTarget, 0, len(v.Targets))}
	for _, nv := range v.Nodes {
		out.Nodes = append(out.Nodes, fleetNodeView(nv, v, now))
	}
	for _, tv := range v.Targets {
		t := api.FleetTarget{Target: tv.Target, Verdict: tv.Verdict, Reason: tv.Reason, Observers: make([]api.ObserverVerdict, 0, len(tv.Observers))}
		if !tv.Since.IsZero() {
			since := tv.Since.UTC()
			t.Since = &since
		}
		for _, o := range tv.Observers {
			ov := api.ObserverVerdict{Node: o.Node, Region: o.Region, State: "down", At: o.HeardAt.UTC(), Stale: o.Stale, Own: o.Own}
			if o.Up {
				ov.State = "up"
			}
			switch {
			case o.Stale:
				ov.Reason = fmt.Sprintf("stale: not heard for %s, not counted", now.Sub(o.HeardAt).Round(time.Second))
			case o.Own:
				ov.Reason = "this node's own check"
			}
			t.Observers = append(t.Observers, ov)
		}
		out.Targets = append(out.Targets, t)
	}
	return out, nil
}

// fleetNodeView is one node of the view as the API shows it.
func fleetNodeView(nv fleetnode.NodeView, v fleetnode.View, now time.Time) api.FleetNodeView {
	st := nv.Status
	n := api.FleetNodeView{Name: st.Node, Region: st.Region, Digest: st.Digest, Serial: st.Serial, Canary: st.Canary,
		ViewAt: st.ViewAt.UTC(), ViewAge: "-", HealthMode: st.HealthMode, Warning: st.Warning, Pending: st.Pending,
		Version: st.Version, Location: nodeLocation(st), Self: nv.Self}
	if !st.ViewAt.IsZero() {
		n.ViewAge = max(now.Sub(st.ViewAt), 0).Round(100 * time.Millisecond).String()
	}
	if !nv.HeardAt.IsZero() {
		heard := nv.HeardAt.UTC()
		n.HeardAt = &heard
	}
	if nv.Self {
		n.HealthMode = v.HealthMode // as it is now, not as last written
	}
	if n.HealthMode == "" {
		n.HealthMode = "unknown" // a node of a version that does not say
	}
	if st.Error != "" {
		n.Error = fmt.Sprintf("newest bundle serial %d (%s) rejected: %s", st.ErrorSerial, fleet.ShortDigest(st.ErrorDigest), st.Error)
	}
	return n
}

// nodeLocation is where a node is: its configured location, else its
// country's centroid; nil when its status says neither.
func nodeLocation(st fleet.Status) *api.LatLon {
	if st.Lat != nil && st.Lon != nil {
		return &api.LatLon{Lat: *st.Lat, Lon: *st.Lon}
	}
	if c, ok := geo.LookupCountry(st.Country); ok && st.Country != "" {
		return &api.LatLon{Lat: c.Lat, Lon: c.Lon}
	}
	return nil
}

// fleetNodes are the fleet's nodes as points of the overview's world map
// (those whose status gives a location or a country): state "error" for a
// node that could not apply the newest bundle, "stale" for one not
// deciding health by the fleet's live view, else "up". Off a fleet, nil.
func (b *backend) fleetNodes() []api.MapPoint {
	fl := b.n.fl
	if fl == nil {
		return nil
	}
	var out []api.MapPoint
	for _, nv := range fl.Statuses() {
		loc := nodeLocation(nv.Status)
		if loc == nil {
			continue
		}
		state := "up"
		mode := nv.HealthMode
		if nv.Self {
			mode, _ = fl.HealthMode(time.Now())
		}
		switch {
		case nv.Error != "":
			state = "error"
		case mode != "" && mode != fleetnode.ModeQuorum:
			state = "stale"
		}
		out = append(out, api.MapPoint{Kind: "node", Label: nv.Node, LatLon: *loc, State: state})
	}
	return out
}

// explainAsNode answers Explain for req.Node, a node of the fleet: the
// served configuration and zones, with the policies compiled for that
// node's identity (name, region, country, location, as its status
// publishes them), and this node's live health, overrides and latency
// map. The identity decides rules on node and node_region and, with
// ecs.unknown_client: node, where an unknown client is steered to.
func (b *backend) explainAsNode(req explain.Request) (*explain.Report, error) {
	fl := b.n.fl
	if fl == nil {
		return nil, fmt.Errorf("node %q: this node is in no fleet: leave node out: %w", req.Node, api.ErrBadInput)
	}
	h := b.n.srv.Handler()
	if req.Node == fl.Name() {
		return explain.Run(h, req)
	}
	st, ok := fl.Status(req.Node)
	if !ok {
		var live []string
		for _, nv := range fl.Statuses() {
			live = append(live, nv.Node)
		}
		return nil, fmt.Errorf("node %q: no live node of the fleet has that name (live: %s): %w", req.Node, strings.Join(live, ", "), api.ErrBadInput)
	}
	snap := h.Snapshot()
	as, err := b.n.asNode.snapshot(b.n, snap, st)
	if err != nil {
		return nil, err
	}
	other := dnsserver.NewHandler(as)
	other.SetGuard(h.Guard())
	rep, err := explain.Run(other, req)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("answered as node %s would (%s), with health, overrides and latency as node %s sees them",
		req.Node, describeIdentity(as.Config.Node), fl.Name()))
	return rep, nil
}

// describeIdentity says what of a node's identity the policies use.
func describeIdentity(nd *config.Node) string {
	parts := []string{"name " + nd.Name}
	if nd.Region != "" {
		parts = append(parts, "region "+nd.Region)
	}
	if nd.Country != "" {
		parts = append(parts, "country "+nd.Country)
	}
	if l := nd.Location; l != nil {
		parts = append(parts, fmt.Sprintf("location %g,%g", l.Lat, l.Lon))
	}
	return strings.Join(parts, ", ")
}

// nodeExplainCache keeps the policies compiled for the other nodes of
// the fleet (explain with node=), by node: compiled again only when the
// served snapshot or that node's identity changes.
type nodeExplainCache struct {
	mu     sync.Mutex
	base   *snapshot.Snapshot
	tables map[string]nodeTable
}

// maxExplainTables bounds the tables kept: each is a compiled copy of the
// served policies (those that do not depend on the node shared with them).
const maxExplainTables = 4

type nodeTable struct {
	node  config.Node
	table *policy.Table
}

// snapshot is snap with its policies compiled for st's node, their live
// state set from this node's health, overrides and latency map now.
func (c *nodeExplainCache) snapshot(n *Node, snap *snapshot.Snapshot, st fleet.Status) (*snapshot.Snapshot, error) {
	nd := config.Node{Name: st.Node, Region: st.Region, Country: st.Country}
	if st.NodeName != "" {
		nd.Name = st.NodeName
	}
	if st.Lat != nil && st.Lon != nil {
		nd.Location = &config.Location{Lat: *st.Lat, Lon: *st.Lon}
	}
	as := *snap
	cfg := *snap.Config
	cfg.Node = &nd
	as.Config = &cfg
	if snap.Policies == nil {
		return &as, nil // nothing steered: the identity changes nothing
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base != snap {
		c.base, c.tables = snap, map[string]nodeTable{} // at most one per node of the fleet
	}
	nt, ok := c.tables[st.Node]
	if !ok || !sameNode(nt.node, nd) {
		if len(c.tables) >= maxExplainTables {
			clear(c.tables) // a large fleet explored node by node: start again
		}
		t, _, err := policy.BuildWith(&cfg, snap.Geo, snap.Policies)
		if err != nil {
			return nil, fmt.Errorf("compiling the policies as node %s: %w", st.Node, err)
		}
		nt = nodeTable{node: nd, table: t}
		c.tables[st.Node] = nt
	}
	// A live state of its own each time: no hooks (no metrics, no pool
	// marked answered), this node's health and latency as they are now.
	live := policy.NewLive(nt.table, policy.LiveOptions{})
	live.SetHealth(n.hc.usable, n.hc.poolOverride)
	if l := n.lat; l != nil {
		l.mu.Lock()
		if l.store != nil {
			live.SetLatency(l.store.Map(), policy.NewLatencyMemory(l.opts), l.store.Updates(), time.Now())
		}
		l.mu.Unlock()
	}
	as.Policies, as.Live = nt.table, live
	return &as, nil
}

func sameNode(a, b config.Node) bool {
	return a.Name == b.Name && a.Region == b.Region && a.Country == b.Country &&
		(a.Location == nil) == (b.Location == nil) && (a.Location == nil || *a.Location == *b.Location)
}
