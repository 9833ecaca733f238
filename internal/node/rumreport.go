package node

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/rum"
	"github.com/steer-dns/steer/internal/snapshot"
)

// RUMReport implements api.RUMReportBackend: the beacon store's
// aggregates against the served policy of record (see rum.BuildReport).
// The policy's choice for a block is the served snapshot's own decision
// for an ECS query from it (Record.Decide with the live health and
// latency state, as Live.Decide sets them) without marking anything
// answered: a report is not traffic.
func (b *backend) RUMReport(record string, o rum.ReportOptions) (*rum.Report, error) {
	store := b.n.rum.currentStore()
	if store == nil {
		return nil, fmt.Errorf("no beacon listener is configured (rum.listen): %w", api.ErrNotFound)
	}
	snap := b.n.srv.Handler().Snapshot()
	if snap == nil || snap.Policies == nil {
		return nil, fmt.Errorf("no configuration loaded: %w", api.ErrNotFound)
	}
	r, err := reportRecord(snap, record)
	if err != nil {
		return nil, err
	}
	if o.Margin == 0 {
		o.Margin = b.n.lat.margin()
	}
	if err := o.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrBadInput, err)
	}
	return rum.BuildReport(rum.ReportInput{
		Record:     r.Name,
		Aggregates: store.Snapshot(),
		Locate:     func(p netip.Prefix) geo.Info { return locate(snap, p) },
		Choose:     func(p netip.Prefix) string { return choose(snap, r, p) },
	}, o)
}

// reportRecord is the record a report compares with: the one named, or
// the only one steered by latency, or the only steered record.
func reportRecord(snap *snapshot.Snapshot, name string) (*policy.Record, error) {
	t := snap.Policies
	if name != "" {
		r := t.Get(dns.CanonicalName(name))
		if r == nil {
			return nil, fmt.Errorf("%s is not a steered record: %w", name, api.ErrNotFound)
		}
		return r, nil
	}
	var lat, all []*policy.Record
	for _, r := range t.Records {
		all = append(all, r)
		if r.HasLatency() {
			lat = append(lat, r)
		}
	}
	switch {
	case len(lat) == 1:
		return lat[0], nil
	case len(lat) == 0 && len(all) == 1:
		return all[0], nil
	case len(all) == 0:
		return nil, fmt.Errorf("no steered record is served: %w", api.ErrNotFound)
	}
	cands := lat
	if len(cands) == 0 {
		cands = all
	}
	var names []string
	for _, r := range cands {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	if len(names) > 10 {
		names = append(names[:10], "...")
	}
	return nil, fmt.Errorf("%w: name the record to compare with (name=): %s", api.ErrBadInput, strings.Join(names, ", "))
}

// locate is where the served geo databases put a block.
func locate(snap *snapshot.Snapshot, p netip.Prefix) geo.Info {
	if snap.Geo == nil {
		return geo.Info{}
	}
	info, _, err := snap.Geo.Lookup(p.Addr())
	if err != nil {
		return geo.Info{}
	}
	return info
}

// choose returns the site of the first pool record r answers an ECS
// query from block p with now ("" for none).
func choose(snap *snapshot.Snapshot, r *policy.Record, p netip.Prefix) string {
	// A record of addresses is asked for A by every client network
	// (Record.Type is A for A and AAAA); a CNAME record for anything.
	qtype := r.Type
	q := policy.Query{Client: p.Addr(), ClientBits: p.Bits(), Resolver: p.Addr(), Qtype: qtype}
	live := snap.Live
	if live != nil {
		q.Up, q.Scopes = live.Usable(r, qtype)
		if r.HasLatency() {
			q.Latency = live.Latency()
		}
	} else {
		q.Up = r.Enabled
	}
	d := r.Decide(&q)
	if d.ServFail || d.NoData || d.Pools == 0 {
		return ""
	}
	i := bits.TrailingZeros64(d.Pools)
	if i >= len(r.Pools) {
		return ""
	}
	if s := r.Pools[i].Site; s != "" {
		return s
	}
	return r.Pools[i].Name
}

// currentStore is the beacon store while RUM is configured (nil: off).
func (w *rumWiring) currentStore() *rum.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg == nil {
		return nil
	}
	return w.store
}

// margin is the latency map's switch margin, defaults filled in.
func (l *latencyWiring) margin() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.WithDefaults().SwitchMargin
}
