package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/metrics"
)

// backend is the running server as the admin API sees it.
type backend struct {
	log          *slog.Logger
	srv          *dnsserver.Server
	hc           *healthWiring
	lat          *latencyWiring
	ac           *anycastWiring // nil without anycast
	path, source string
	reloadMu     sync.Mutex
}

func (b *backend) Ready() (bool, string) {
	if len(b.srv.Addrs()) == 0 {
		return false, "no listener is up"
	}
	if b.srv.Handler().Snapshot() == nil {
		return false, "no configuration loaded"
	}
	return true, ""
}

func (b *backend) Explain(req explain.Request) (*explain.Report, error) {
	return explain.Run(b.srv.Handler(), req)
}

func (b *backend) SetTargetState(addr netip.Addr, state string, expires time.Time) error {
	o, err := health.ParseOverride(state)
	if err != nil {
		return err
	}
	b.hc.manager.SetOverride(addr, o, expires)
	b.log.Info("target state set", "address", addr.String(), "state", state, "expires", expires)
	return nil
}

func (b *backend) SetPoolState(record, pool, state string, expires time.Time) error {
	o, err := health.ParseOverride(state)
	if err != nil {
		return err
	}
	snap := b.srv.Handler().Snapshot()
	r := snap.Policies.Get(dns.CanonicalName(record))
	if r == nil {
		return fmt.Errorf("record %s: %w", record, api.ErrNotFound)
	}
	found := false
	for _, p := range r.Pools {
		found = found || p.Name == pool
	}
	if !found {
		return fmt.Errorf("record %s has no pool %s: %w", record, pool, api.ErrNotFound)
	}
	b.hc.setPool(r.Name, pool, o, expires)
	b.log.Info("pool state set", "record", r.Name, "pool", pool, "state", state, "expires", expires)
	return nil
}

func (b *backend) Reload() error {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	return reload(b.log, b.srv, b.hc, b.lat, b.path, b.source)
}

func (b *backend) Status() api.Status {
	snap := b.srv.Handler().Snapshot()
	st := api.Status{Version: versionString(), Loaded: snap.Loaded}
	st.Anycast = b.ac.status()
	for _, z := range snap.Zones.Zones() {
		st.Zones = append(st.Zones, api.ZoneStatus{Origin: z.Origin, Serial: z.Serial(), Records: z.Records, File: z.File})
	}
	if snap.Geo != nil {
		for _, d := range snap.Geo.DBs {
			st.Geo = append(st.Geo, api.GeoStatus{Name: d.Name, Type: d.Type, Layout: d.Layout.String(), Built: d.Built})
		}
	}
	if snap.Policies == nil {
		return st
	}
	states := b.hc.manager.Snapshot()
	t := snap.Policies
	for _, r := range t.Records {
		rs := api.RecordStatus{Name: r.Name, Type: dns.TypeToString[r.Type], TTL: r.TTL}
		up := t.Up(r, dns.TypeA) | t.Up(r, dns.TypeAAAA)
		for _, p := range r.Pools {
			ps := api.PoolStatus{Name: p.Name, State: "up", LastAnswered: t.LastAnswered(r, p.Index)}
			bit := uint64(1) << p.Index
			switch {
			case r.Enabled&bit == 0:
				ps.State, ps.Reason = "disabled", "enabled: false"
			case up&bit == 0:
				ps.State, ps.Reason = "down", fmt.Sprintf("fewer than %d of its addresses pass %s", p.MinUp, p.Check)
			}
			if ov, ok := b.hc.poolState(r.Name, p.Name); ok {
				ps.State, ps.Reason = ov.o.String(), "set by the operator"
				if !ov.expires.IsZero() {
					e := ov.expires
					ps.Expires = &e
				}
				if ov.o == health.OverrideDrain {
					safe := t.DrainSafe(r, p.Index)
					ps.DrainSafe = &safe
				}
			}
			for _, a := range p.Addrs() {
				ts := api.TargetStatus{Address: a.String(), Check: p.Check, State: "unchecked"}
				if p.Check != "" {
					s := states[health.Key{Addr: a, Check: p.Check}]
					ts.State, ts.Reason, ts.Since = s.Status.String(), s.Reason, s.Since
					if s.Override != health.OverrideNone {
						ts.State = s.Override.String() + " (override)"
					}
					if s.LastLatency > 0 {
						ts.LastLatency = s.LastLatency.String()
					}
				}
				ps.Targets = append(ps.Targets, ts)
			}
			rs.Pools = append(rs.Pools, ps)
		}
		st.Records = append(st.Records, rs)
	}
	return st
}

// startAPI serves the admin API as configured. Its listen address and
// token are read at start; a reload does not move them.
func startAPI(log *slog.Logger, c config.API, cfg *config.Config, b *backend, m *metrics.Metrics) (func(context.Context) error, error) {
	token := ""
	if c.TokenFile != "" {
		var err error
		if token, err = api.LoadToken(cfg.Resolve(c.TokenFile)); err != nil {
			return nil, err
		}
	} else if c.TokenEnv != "" {
		if token = strings.TrimSpace(os.Getenv(c.TokenEnv)); token == "" {
			return nil, fmt.Errorf("api.token_env: $%s is empty", c.TokenEnv)
		}
	} else if ap, err := netip.ParseAddrPort(c.Listen); err != nil || !ap.Addr().IsLoopback() {
		log.Warn("the admin API has no token_file and does not listen on loopback: anyone who reaches it can change answers", "listen", c.Listen)
	}
	h := api.NewHandler(b, api.Options{Token: token, Log: log, Metrics: m.Handler()})
	_, stop, err := api.Serve(context.Background(), c.Listen, h, log)
	if err != nil {
		return nil, err
	}
	return stop, nil
}
