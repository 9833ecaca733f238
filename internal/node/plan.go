package node

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/traffic"
)

// One plan for check, start and reload, as Caddy's Validate is its run
// without starting: every part prepares from the configuration (reading
// its files, building what it will serve, binding a moved API listener)
// and the plan collects every problem. steer check prepares on throwaway
// parts and aborts; New prepares on the node's parts and commits; a
// reload prepares, swaps the snapshot in (swap, the one place a snapshot
// is served) and commits, or aborts when the swap fails.

// plan is a configuration prepared on the parts, not yet applied.
type plan struct {
	cfg   *config.Config
	snap  *snapshot.Snapshot
	ql    *qlChange  // nil: not prepared
	api   *apiChange // nil: not prepared (check, and New: Start binds it)
	guard *guardPlan
	// The latency files rejected and those not readable: a node serves
	// without them, steer check reports them.
	latErrs, latWarns []string
}

// parts are what a plan prepares on. dry (steer check) opens and binds
// nothing: the query log's directory is checked instead of the file
// opened.
type parts struct {
	ql  *queryLog
	api *apiWiring // nil: the API is not prepared
	grd *guardWiring
	lat *latencyWiring
	dry bool
}

// prepare prepares cfg, built into snap (nil when the build failed), on
// ps and collects every problem; on an error whatever was prepared is
// undone and the plan returned holds only the latency warnings.
func prepare(cfg *config.Config, snap *snapshot.Snapshot, ps parts) (*plan, error) {
	p := &plan{cfg: cfg, snap: snap}
	var probs diag.Problems
	add := func(err error) {
		var ds diag.Problems
		switch {
		case err == nil:
		case errors.As(err, &ds):
			probs = append(probs, ds...)
		default:
			probs = append(probs, diag.Problem{Msg: err.Error()})
		}
	}
	var err error
	p.guard, err = ps.grd.prepare(cfg)
	add(err)
	p.ql, err = ps.ql.prepare(cfg, ps.dry)
	add(err)
	if ps.api != nil && len(probs) == 0 {
		p.api, err = ps.api.prepare(cfg)
		add(err)
	}
	// Latency files are read into the map only when the rest holds (a
	// dry run's map is thrown away).
	if snap != nil && (ps.dry || len(probs) == 0) {
		p.latErrs, p.latWarns = ps.lat.prepare(snap)
	}
	if len(probs) > 0 {
		p.abort()
		return &plan{latErrs: p.latErrs, latWarns: p.latWarns}, probs.Err()
	}
	return p, nil
}

// abort undoes what prepare opened or bound.
func (p *plan) abort() {
	p.ql.abort()
	p.api.abort()
}

// commit applies the prepared parts (after the swap) and says what
// changed.
func (p *plan) commit(n *Node) []string {
	var changed []string
	if p.ql != nil {
		changed = append(changed, p.ql.commit()...)
	}
	if p.api != nil {
		changed = append(changed, p.api.commit(p.cfg.API.Token.Value())...)
	}
	changed = append(changed, n.rum.configure(p.cfg, p.snap)...)
	return append(changed, n.grd.commit(p.guard)...)
}

// swap serves snap in old's place (nil at start): the one place a
// snapshot is swapped in, for start and for every reload (configuration,
// geo databases, zones). The health checks are prepared for a table that
// is new, or for new health settings (checks); then health and latency
// are set on the new table with their locks held across the switch, so a
// change of either lands on the old table before or on the new one
// after, and is pushed into the new table once. The replaced snapshot's
// memory is given back to the system shortly after.
func (n *Node) swap(old, snap *snapshot.Snapshot, checks bool) error {
	var fresh *policy.Live // nil: the table and its live state are kept
	if old == nil || snap.Policies != old.Policies {
		fresh = snap.Live
	}
	if checks || fresh != nil {
		n.hc.prepare(snap)
		if snap.Policies != nil {
			n.tr.SetRecords(traffic.RecordsOf(snap.Policies))
		}
	}
	defer n.dash.notify("reload") // last: after the health is set
	defer n.releaseMemory()
	defer func() {
		select {
		case n.sigKick <- struct{}{}: // the renewal timer looks at the new signatures
		default:
		}
		if n.keys != nil {
			n.keys.poke() // the key plans' timer looks at the new keys
		}
	}()
	// Health first: a new table's latency choices are then evaluated
	// with the health it goes live with.
	defer n.hc.hold(fresh)()
	defer n.lat.hold(fresh)()
	defer n.load.configure(snap) // after the swap: steps the table now served
	if err := n.srv.Apply(snap); err != nil {
		return err
	}
	n.copies.add(snap.Copies) // once served: its zones' last good copies
	return nil
}

// Check validates a configuration and every file it names as New would,
// for steer check: the same plan, aborted. What a node serves around is an
// error here: zones that fail (a node starts with them degraded) and
// latency files that are rejected (a node starts without them).
func Check(path string) (summary string, warns []string, err error) {
	r, err := CheckFile(path)
	return r.Summary, r.Warnings, err
}

// CheckResult is what steer check reports of a configuration.
type CheckResult struct {
	// Summary is the snapshot's summary (zones, records...).
	Summary string
	// Warnings are file:line warnings, each prefixed "warning: ".
	Warnings []string
	// StateDir is the state directory a node started from the file
	// would use (config.Config.StatePath).
	StateDir string
}

// CheckFile is Check, also saying where the node's state would be kept.
// The state directory is checked without being created: a path under a
// file, or one this user cannot write, is an error.
func CheckFile(path string) (r CheckResult, err error) {
	cfg, err := config.Load(path)
	if err != nil {
		return r, err
	}
	r.StateDir = cfg.StatePath()
	var stateErr error
	if r.StateDir != "" {
		if err := config.CheckStateDir(r.StateDir); err != nil {
			stateErr = cfg.StateProblem(err)
		}
	}
	snap, ws, buildErr := snapshot.Build(cfg)
	switch {
	case cfg.Health.StateFile == "":
	case cfg.StateDir == "":
		ws.Add(cfg.File, cfg.Line("health.state_file"), "health.state_file is deprecated: set state_dir instead, move the file to health.json in it and remove this key (until then the state directory is the state file's, %s)",
			r.StateDir)
	default:
		ws.Add(cfg.File, cfg.Line("health.state_file"), "health.state_file is deprecated: the health state is kept in %s instead of %s until this key is removed (move the file there first)",
			cfg.HealthStateFile(), filepath.Join(r.StateDir, config.StateHealth))
	}
	if refuseReason(cfg.API, "") != "" {
		ws.Add(cfg.File, cfg.Line("api.listen"), "api.listen %s is not a loopback address and no token is set: changes through the API will be refused (set api.token_file)", cfg.API.Listen)
	}
	for _, w := range ws {
		w.Msg = "warning: " + w.Msg
		r.Warnings = append(r.Warnings, w.String())
	}
	log := slog.New(slog.DiscardHandler)
	p, err := prepare(cfg, snap, parts{ql: &queryLog{log: log}, grd: &guardWiring{random: cookie.Random()},
		lat: newLatency(log, nil), dry: true})
	p.abort()
	r.Warnings = append(r.Warnings, p.latWarns...)
	var errs []string
	for _, e := range []error{stateErr, buildErr, err} {
		if e != nil {
			errs = append(errs, e.Error())
		}
	}
	if errs = append(errs, p.latErrs...); len(errs) > 0 {
		return r, errors.New(strings.Join(errs, "\n"))
	}
	r.Summary = snap.Summary()
	return r, nil
}
