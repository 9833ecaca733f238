package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/snapshot"
)

// backend is the running node as the admin API sees it.
type backend struct{ n *Node }

func (b *backend) Ready() (bool, string) {
	srv := b.n.srv
	if len(srv.Addrs()) == 0 {
		return false, "no listener is up"
	}
	snap := srv.Handler().Snapshot()
	if snap == nil {
		return false, "no configuration loaded"
	}
	if d := degraded(snap); len(d) > 0 {
		// Still serving: a load balancer must not take the node out for
		// one broken zone, but the reason is there to read.
		return true, "degraded: " + d[0]
	}
	return true, ""
}

func (b *backend) Explain(req explain.Request) (*explain.Report, error) {
	if req.Node != "" {
		return b.explainAsNode(req) // fleetview.go
	}
	return explain.Run(b.n.srv.Handler(), req)
}

// SetTargetState overrides a target address; an address that no pool of
// the served records lists is refused with ErrNotFound.
func (b *backend) SetTargetState(addr netip.Addr, state string, expires time.Time) error {
	o, err := health.ParseOverride(state)
	if err != nil {
		return err
	}
	addr = addr.Unmap()
	if !servedTargets(b.n.srv.Handler().Snapshot())[addr] {
		return fmt.Errorf("%s is no address of any pool of the served records: %w", addr, api.ErrNotFound)
	}
	// Applied here at once; in a fleet, for the whole fleet too: every
	// node (this one too) applies it as it follows the store.
	b.n.hc.manager.SetOverride(addr, o, expires)
	if fl := b.n.fl; fl != nil {
		return fleetErr(fl.SetTargetOverride(addr, o, expires))
	}
	return nil
}

// servedTargets is the set of addresses the pools of snap's records list.
func servedTargets(snap *snapshot.Snapshot) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	if t := snap.Policies; t != nil {
		for _, r := range t.Records {
			for _, p := range r.Pools {
				for _, a := range p.Addrs() {
					out[a] = true
				}
			}
		}
	}
	return out
}

func (b *backend) SetPoolState(record, pool, state string, expires time.Time) error {
	o, err := health.ParseOverride(state)
	if err != nil {
		return err
	}
	name, err := findPool(b.n.srv.Handler().Snapshot(), record, pool)
	if err != nil {
		return fmt.Errorf("%v: %w", err, api.ErrNotFound)
	}
	b.n.hc.manager.SetPoolOverride(name, pool, o, expires)
	if fl := b.n.fl; fl != nil {
		return fleetErr(fl.SetPoolOverride(name, pool, o, expires))
	}
	return nil
}

// fleetErr is how the API reports the outcome of a fleet-wide override:
// one the store did not take is applied here and pending for the fleet
// (written when the store answers again).
func fleetErr(err error) error {
	if errors.Is(err, fleetnode.ErrPending) {
		return &api.PendingError{Where: "fleet", Reason: err.Error()}
	}
	if err != nil {
		return fmt.Errorf("the fleet's store: %w", err)
	}
	return nil
}

// findPool returns record's canonical name when snap serves it and it
// has pool; otherwise an error naming what is unknown.
func findPool(snap *snapshot.Snapshot, record, pool string) (string, error) {
	r := snap.Policies.Get(dns.CanonicalName(record))
	if r == nil {
		return "", fmt.Errorf("record %s is not a steered record", record)
	}
	for _, p := range r.Pools {
		if p.Name == pool {
			return r.Name, nil
		}
	}
	return "", fmt.Errorf("record %s has no pool %s", r.Name, pool)
}

func (b *backend) Reload(ctx context.Context) (api.ReloadResult, error) {
	return b.n.Reload(ctx)
}

// ReloadZones implements api.ZoneReloader.
func (b *backend) ReloadZones(ctx context.Context, zones []string) (api.ReloadResult, error) {
	return b.n.ReloadZones(ctx, zones)
}

// ReloadForced implements api.ForceReloader.
func (b *backend) ReloadForced(ctx context.Context, caller string) (api.ReloadResult, error) {
	return b.n.ReloadForced(ctx, caller)
}

func (b *backend) PushLatency(format string, body io.Reader) (api.LatencyResult, error) {
	return b.n.lat.push(format, body)
}

func (b *backend) LatencyStatus() api.LatencyStatus { return b.n.lat.status() }

func (b *backend) Status() api.Status { return b.n.Status() }

// RefreshZone implements api.TransferBackend.
func (b *backend) RefreshZone(zone string) error {
	if !b.n.xfr.RefreshIn(zone) {
		return fmt.Errorf("%w: %s is not a secondary zone here", api.ErrNotFound, zone)
	}
	return nil
}

// Status describes everything being served now.
func (n *Node) Status() api.Status {
	snap := n.srv.Handler().Snapshot()
	st := api.Status{Version: n.opts.Version, Loaded: snap.Loaded, LastReload: n.lastResult.Load()}
	st.Anycast = n.ac.status()
	if nd := snap.Config.Node; nd != nil {
		ns := &api.NodeStatus{Name: nd.Name, Region: nd.Region, Country: nd.Country, UnknownClient: snap.Config.ECS.UnknownClient}
		if l := nd.Location; l != nil {
			ns.Lat, ns.Lon = &l.Lat, &l.Lon
		}
		ns.AnycastResolvers = append(ns.AnycastResolvers, snap.Config.ECS.AnycastResolvers...)
		st.Node = ns
	}
	st.Degraded = degraded(snap)
	if n.fl != nil {
		st.Pending = append(n.fl.Pending(), n.fl.PendingLoads()...)
	}
	sigs, now := n.signatures(), time.Now()
	failed := map[string]string{}
	for _, d := range snap.Degraded {
		failed[d.Origin] = d.Serving
	}
	for _, z := range snap.Zones.Zones() {
		zs := api.ZoneStatus{Origin: z.Origin, Serial: z.Serial(), Records: z.Records, File: z.File, Serving: "file"}
		if snap.Secondaries[z.Origin] {
			zs.Serving = "transfer"
		}
		if s, ok := failed[z.Origin]; ok {
			zs.Serving = s
		}
		zs.Transfer = n.xfr.status(snap, z)
		if zs.DNSSEC = dnssecStatus(z, sigs, now); zs.DNSSEC != nil {
			n.keyStatus(zs.DNSSEC, z, now)
		}
		st.Zones = append(st.Zones, zs)
	}
	if snap.Geo != nil {
		for _, d := range snap.Geo.DBs {
			st.Geo = append(st.Geo, api.GeoStatus{Name: d.Name, Type: d.Type, Layout: d.Layout.String(), Built: d.Built})
		}
	}
	if snap.Policies == nil {
		return st
	}
	states := n.hc.manager.Snapshot()
	t := snap.Live
	for _, r := range snap.Policies.Records {
		rs := api.RecordStatus{Name: r.Name, Type: dns.TypeToString[r.Type], TTL: r.TTL}
		for _, p := range r.Pools {
			state, why, _ := t.PoolState(r, p)
			ps := api.PoolStatus{Name: p.Name, State: state, Reason: why, LastAnswered: t.LastAnswered(r, p.Index)}
			if pl, ok := t.PoolLoad(r, p); ok {
				ps.Capacity = pl.Reason()
			}
			if o, exp, ok := n.hc.manager.PoolOverride(r.Name, p.Name); ok {
				if !exp.IsZero() {
					ps.Expires = &exp
				}
				if o == health.OverrideDrain {
					safe := t.DrainSafe(r, p.Index, time.Now())
					ps.DrainSafe = &safe
				}
			}
			for _, a := range p.Addrs() {
				ts := api.TargetStatus{Address: a.String(), Check: p.Check, State: "unchecked"}
				if p.Check != "" {
					s := states[health.Key{Addr: a, Check: p.Check}]
					ts.State, ts.Reason, ts.Since = s.Status.String(), s.Reason, s.Since
					if s.LastLatency > 0 {
						ts.LastLatency = s.LastLatency.String()
					}
				}
				if o, _, ok := n.hc.manager.TargetOverride(a); ok {
					ts.State = o.String() + " (override)"
				}
				ps.Targets = append(ps.Targets, ts)
			}
			rs.Pools = append(rs.Pools, ps)
		}
		st.Records = append(st.Records, rs)
	}
	return st
}
