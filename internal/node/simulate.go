package node

import (
	"fmt"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/simulate"
	"github.com/steer-dns/steer/internal/snapshot"
)

// SimulateBase is what steer simulate runs a scenario against: the
// configuration at path (the embedded demo when empty), its geo
// databases and its compiled policies, as a node would start with them
// but without zones, keys or listeners, which a simulation does not
// read. A scenario's config events load their file with config.Load.
// Problems are diag.Problems (file:line).
func SimulateBase(path string) (simulate.Base, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return simulate.Base{}, err
	}
	var ps diag.Problems
	if len(cfg.Records) == 0 {
		ps.Add(cfg.File, 0, "no steered record (records:): nothing to simulate")
		return simulate.Base{}, ps
	}
	set, err := snapshot.OpenGeo(cfg)
	if err != nil {
		return simulate.Base{}, err
	}
	table, _, err := policy.Build(cfg, set)
	if err != nil {
		return simulate.Base{}, err
	}
	return simulate.Base{Config: cfg, Geo: set, Table: table, LoadConfig: config.Load}, nil
}

// SimulateBase implements api.SimulateBackend: the served snapshot's
// configuration, geo databases and compiled policies (only read: a
// scenario's weight changes compile a table of their own, and its
// health events set a live state of their own).
func (b *backend) SimulateBase() (simulate.Base, error) {
	snap := b.n.srv.Handler().Snapshot()
	if snap == nil || snap.Policies == nil || len(snap.Policies.Records) == 0 {
		return simulate.Base{}, fmt.Errorf("the served configuration steers no record: nothing to simulate: %w", api.ErrNotFound)
	}
	return simulate.Base{Config: snap.Config, Geo: snap.Geo, Table: snap.Policies}, nil
}
