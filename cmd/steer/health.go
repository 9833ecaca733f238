package main

import (
	"log/slog"
	"net/netip"

	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/snapshot"
)

// healthWiring connects the health checker to the snapshots the server
// answers from.
type healthWiring struct {
	manager *health.Manager
	srv     *dnsserver.Server
}

func newHealth(log *slog.Logger, srv *dnsserver.Server) *healthWiring {
	h := &healthWiring{manager: health.NewManager(log), srv: srv}
	h.manager.OnChange(func() {
		if s := srv.Handler().Snapshot(); s.Policies != nil {
			s.Policies.SetHealth(h.usable)
		}
	})
	return h
}

func (h *healthWiring) usable(a netip.Addr, check string) bool {
	return h.manager.Usable(health.Key{Addr: a, Check: check})
}

// prepare starts and stops checkers for snap's pools (keeping the state
// of targets that stay) and gives snap the current health before it is
// swapped in.
func (h *healthWiring) prepare(snap *snapshot.Snapshot) {
	h.manager.Apply(snap.HealthChecks, snap.HealthKeys())
	if snap.Policies != nil {
		snap.Policies.SetHealth(h.usable)
	}
}
