// Package fleetnode is a node's membership of a fleet, over the store
// (internal/fleet), the health manager (internal/health) and the quorum
// (internal/quorum). A Member follows the configuration bundle published
// with steer fleet push (the current bundle, or the canary when it names
// the node) and hands it to the node's one reload path, keeps the bundle
// last applied on disk for a restart, claims the node's name and keeps
// its status under its lease (re-written every lease_ttl/3: the refresh
// that keeps its observations live), shares health observations with
// every other node (written when they change; judged live by when this
// node heard them, on its own clock: health.go) and lets the quorum
// decide each target, warns when the store's database passes half its
// quota, follows the
// fleet-wide operator overrides into the health manager (with those set
// while the store was unreachable over them until the store takes them,
// overrides.go), and agrees the
// serials of zones transferred out (serials.go). It registers its
// own metrics (steer_fleet_*, metrics.go) in the registry it is given.
//
// A Member is built from narrow inputs (a logger, the node's local file,
// a function that requests a reload, the health manager and a function
// naming a check's interval), never from the node itself; the node
// (internal/node) wires it in. The query path never reads the store.
package fleetnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
)

// Options are what a Member is built from.
type Options struct {
	Log *slog.Logger
	// Local is the node's own file, with its fleet section.
	Local *config.Config
	// Version is the node's version, reported in its status.
	Version string
	// Reload asks the node for a reload (a new bundle is published).
	Reload func(why string)
	// StateDir is the node's state directory (config.Config.StatePath
	// of the local file); the member keeps its bundle cache and the
	// fleet's health view under its "fleet" directory. "" keeps nothing.
	StateDir string
	// Now, if set, is the node's wall clock where it is published for
	// other nodes to read (an observation's checked_at); tests skew it.
	// Nothing another node decides depends on it.
	Now func() time.Time
}

// Member makes the node one of a fleet: its configuration and zones
// come from the bundle published in the store (steer fleet push), which
// it follows and applies through the one reload path, and it reports what
// it serves under its own lease. The local file holds only the fleet
// section and what is the node's own (config.NodeFileKeys: listen, api,
// anycast, node, identity, state_dir), which override the bundle's
// (Overlay). The last bundle it applied (not merely the newest it saw)
// is kept on disk, so a node restarted while the store is unreachable, or
// after a push it could not apply, serves what it served before.
type Member struct {
	log     *slog.Logger
	version string
	reload  func(why string)
	now     func() time.Time // Options.Now, or time.Now
	// local is the node's own file as read at start; its fleet section
	// is fixed for the process. own is the file as last read
	// (ReloadLocal), with local's fleet section: what Overlay takes.
	local    *config.Config
	own      atomic.Pointer[config.Config]
	store    fleet.Store
	prefix   string
	stateDir string // the node's state directory ("": keep nothing)
	cache    string // where the last bundle is kept ("": nowhere)

	mu       sync.Mutex
	kvs      map[string]fleet.KV // the view of P/config/
	latest   fleet.Bundle        // the newest complete bundle seen
	served   fleet.Bundle        // the bundle the node serves
	kept     fleet.Bundle        // the bundle last applied, as kept on disk
	applyErr string              // why latest is not served
	errOf    fleet.Bundle        // the bundle applyErr is about
	viewAt   time.Time
	since    time.Time
	lease    fleet.Lease
	wg       sync.WaitGroup
	// resync is closed (and replaced) when the link to the store was
	// seen broken: the followers then start their watches again, so one
	// stalled on a dead connection does not wait for gRPC's keep-alive.
	resync  chan struct{}
	lastRe  time.Time
	failing bool // the last status write failed

	// db is the store's database size last read (watchStoreSize), and
	// storeWarning what the node finds wrong with it ("" when nothing).
	db           fleet.DBStatus
	storeWarning string
	// sizeEvery is how often the database size is read (tests shorten it).
	sizeEvery time.Duration

	// serials agrees exported serials (nil until AgreeSerials).
	serials *Serials
	// keyPlans shares the key plans (nil until ShareKeyPlans).
	keyPlans *KeyPlans

	// pending are operator overrides set on this node that the store has
	// not taken yet, by key (overrides.go); flushKick wakes their writer.
	pending   map[string]pendingOverride
	flushKick chan struct{}
	// pendingLoads are loads put on this node that the store has not
	// taken yet, by key (load.go); loadKick wakes their writer;
	// loadsDropped counts those that turned stale first.
	pendingLoads map[string]pendingLoad
	loadKick     chan struct{}
	loadsDropped atomic.Int64
	// conflicts counts conditional override writes (SetOverridesIf)
	// refused because the fleet's overrides changed after their view.
	conflicts atomic.Int64

	// health shares health across the fleet (nil until ShareHealth).
	health  *quorumHealth
	manager *health.Manager
	// shared is health for the readers that may run before ShareHealth
	// (the admin API's fleet view, view.go).
	shared atomic.Pointer[quorumHealth]

	// traffic shares the traffic windows (nil until ShareTraffic).
	traffic *trafficShare
}

// resyncNow makes every follower start its watch again (at most once a
// second, unless forced: the link just came back).
func (m *Member) resyncNow(force bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force && time.Since(m.lastRe) < time.Second {
		return
	}
	m.lastRe = time.Now()
	close(m.resync)
	m.resync = make(chan struct{})
}

// follow runs fleet.Follow on prefix until ctx ends, starting it again
// whenever resyncNow is called.
// followView keeps a mirror of the keys below prefix (key → value) and
// calls changed with it, and the revision it is complete up to, after
// every snapshot and every batch of events, until ctx ends. The map is reused: changed must not keep it.
func (m *Member) followView(ctx context.Context, prefix string, changed func(view map[string][]byte, rev int64)) {
	view := map[string][]byte{}
	m.follow(ctx, prefix, fleet.Handler{
		Snapshot: func(kvs []fleet.KV, rev int64) {
			clear(view)
			for _, kv := range kvs {
				view[kv.Key] = kv.Value
			}
			changed(view, rev)
		},
		Events: func(evs []fleet.Event, rev int64) {
			for _, e := range evs {
				if e.Kind == fleet.EventDelete {
					delete(view, e.KV.Key)
				} else {
					view[e.KV.Key] = e.KV.Value
				}
			}
			changed(view, rev)
		},
	})
}

func (m *Member) follow(ctx context.Context, prefix string, h fleet.Handler) {
	for ctx.Err() == nil {
		m.mu.Lock()
		ch := m.resync
		m.mu.Unlock()
		child, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-ch:
				cancel()
			case <-child.Done():
			}
		}()
		fleet.Follow(child, m.store, prefix, h)
		cancel()
	}
}

// Open opens the store named by the local file's fleet section (no
// I/O yet, unless etcd authentication is set) and reads the bundle to
// start from: the store's, or the one last applied (kept on disk) when
// the store cannot be read within the dial timeout.
func Open(o Options) (*Member, error) {
	local := o.Local
	f := local.Fleet
	s, err := fleet.OpenEtcd(EtcdConfig(local))
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	m := &Member{log: o.Log, version: o.Version, reload: o.Reload, now: now, local: local, store: s, prefix: f.Etcd.Prefix, kvs: map[string]fleet.KV{},
		stateDir: o.StateDir, cache: stateFile(o.StateDir, BundleCache), since: time.Now(), resync: make(chan struct{})}
	if m.cache != "" {
		if err := os.MkdirAll(filepath.Dir(m.cache), 0o750); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
	}
	kept, kerr := m.loadCache()
	if kerr == nil {
		m.kept = kept
	}
	m.flushKick = make(chan struct{}, 1)
	m.loadKick = make(chan struct{}, 1)
	m.pendingLoads = map[string]pendingLoad{}
	m.loadPending()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(f.Etcd.DialTimeout))
	defer cancel()
	pub, err := fleet.ReadPublished(ctx, s, m.prefix)
	b := pub.For(f.Node)
	switch {
	case err == nil && b.Rev != 0:
		m.latest, m.viewAt = b, time.Now()
	case err == nil:
		m.viewAt = time.Now()
		m.log.Warn("fleet: nothing published yet: serving the local file alone until steer fleet push", "prefix", m.prefix)
	default:
		m.log.Error("fleet: the store cannot be read; starting from the last bundle kept on disk", "err", err, "cache", m.cache)
		if kerr == nil {
			m.latest = kept
		} else {
			m.log.Warn("fleet: no bundle kept on disk either: serving the local file alone", "err", kerr)
		}
	}
	return m, nil
}

// The member's files in the state directory's fleet directory.
const (
	// BundleCache is the bundle kept for a restart without the store.
	BundleCache = "bundle.json"
	// HealthView is the fleet's health view kept for a restart without
	// the store.
	HealthView = "health-view.json"
	// LeaseFile holds the lease the node's status was last written
	// under (hex): a restart after a crash takes its own status key over
	// at once instead of taking it for another node's.
	LeaseFile = "lease"
)

// stateFile is name in the fleet directory of the state directory dir;
// "" when dir is.
func stateFile(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, config.StateFleet, name)
}

type cachedBundle struct {
	Meta  fleet.Meta        `json:"meta"`
	Rev   int64             `json:"rev"`
	Files map[string][]byte `json:"files"`
}

// saveCache keeps b, a bundle the node applied, on disk: a restart
// starts from it when the store cannot be read or its bundle cannot be
// applied.
func (m *Member) saveCache(b fleet.Bundle) {
	if m.cache == "" {
		return
	}
	data, err := json.Marshal(cachedBundle{Meta: b.Meta, Rev: b.Rev, Files: b.Files})
	if err == nil {
		err = writePrivate(m.cache, data)
	}
	if err != nil {
		m.log.Warn("fleet: the bundle could not be kept on disk", "file", m.cache, "err", err)
	}
}

// writePrivate replaces the file at p with data, readable by its owner
// only (the bundle holds the zones' DNSSEC private keys and the TSIG and
// cookie secrets): written to p.tmp and renamed, the temporary file made
// 0600 before anything is written to it, even when an older one was left
// with another mode (os.WriteFile keeps an existing file's mode).
func writePrivate(p string, data []byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func (m *Member) loadCache() (fleet.Bundle, error) {
	if m.cache == "" {
		return fleet.Bundle{}, errors.New("no state directory: nothing is kept on disk")
	}
	data, err := os.ReadFile(m.cache)
	if err != nil {
		return fleet.Bundle{}, err
	}
	var c cachedBundle
	if err := json.Unmarshal(data, &c); err != nil {
		return fleet.Bundle{}, fmt.Errorf("%s: %v", m.cache, err)
	}
	b := fleet.Bundle{Meta: c.Meta, Rev: c.Rev, Files: c.Files}
	if d := b.Digest(); b.Meta.Digest != "" && d != b.Meta.Digest {
		return fleet.Bundle{}, fmt.Errorf("%s: the files do not match the digest %s kept with them", m.cache, fleet.ShortDigest(b.Meta.Digest))
	}
	return b, nil
}

// Local is the node's own file, as last read.
func (m *Member) Local() *config.Config {
	if c := m.own.Load(); c != nil {
		return c
	}
	return m.local
}

// ReloadLocal reads the node's own file at path again (a SIGHUP, an API
// reload): what it sets that is the node's own (listen, api, anycast,
// node, identity) is served from the next Config on. Its fleet section
// and state_dir are fixed for the process: a change of either is named in
// restart and not applied. A file that does not load is an error, with
// file:line, and the one read before stays.
func (m *Member) ReloadLocal(path string) (restart []string, err error) {
	prev := m.Local()
	c, same, err := config.LoadAgain(nil, path, prev)
	if err != nil || same {
		return nil, err
	}
	if !reflect.DeepEqual(c.Fleet, m.local.Fleet) {
		restart = append(restart, "fleet (the node's fleet section: the store and the node's name stay as they were until the next restart)")
	}
	if c.StatePath() != m.local.StatePath() {
		restart = append(restart, "state_dir (the node keeps its state where it did until the next restart)")
	}
	c.Fleet = m.local.Fleet
	m.own.Store(c)
	return restart, nil
}

// Config is the configuration to serve: the newest bundle's, with the
// local file's fleet section and node (name, region, location) and,
// where the local file sets them, its listen, api, anycast and identity
// (Overlay); the local file alone before anything was published.
func (m *Member) Config(prev *config.Config) (*config.Config, fleet.Bundle, error) {
	m.mu.Lock()
	b := m.latest
	m.mu.Unlock()
	return m.configOf(b, prev)
}

// Kept is the configuration of the bundle last applied, as kept on disk,
// for a node whose newest bundle (Config) fails at start: it serves what
// it served before. ok is false when nothing was kept or the kept bundle
// is the newest one (which just failed).
func (m *Member) Kept(prev *config.Config) (cfg *config.Config, b fleet.Bundle, ok bool, err error) {
	m.mu.Lock()
	b, latest := m.kept, m.latest
	m.mu.Unlock()
	if b.Rev == 0 || sameBundle(b, latest) {
		return nil, b, false, nil
	}
	cfg, b, err = m.configOf(b, prev)
	return cfg, b, true, err
}

func (m *Member) configOf(b fleet.Bundle, prev *config.Config) (*config.Config, fleet.Bundle, error) {
	if b.Rev == 0 {
		return m.Local(), b, nil
	}
	// Only the bundle's own files are read through its FS: those it
	// carries (zones, what they include, the cookie secret, TSIG keys).
	// Node-local files (geo databases, latency and feed files, the query
	// log, the API token) are named by absolute paths and opened on the
	// node's disk (config.LocalPath); nothing else of the node's disk is
	// reachable through a pushed name.
	cfg, _, err := config.LoadAgain(b.FS(nil), fleet.ConfigName, prev)
	if err != nil {
		return nil, b, fmt.Errorf("fleet bundle serial %d (revision %d): %w", b.Meta.Serial, b.Rev, err)
	}
	if err := strayKeys(cfg, b); err != nil {
		return nil, b, fmt.Errorf("fleet bundle serial %d (revision %d): %w", b.Meta.Serial, b.Rev, err)
	}
	cfg = Overlay(cfg, m.Local())
	// The state directory is the node's, never the bundle's.
	cfg.StateDir = m.stateDir
	return cfg, b, nil
}

// Overlay gives the pushed configuration cfg (which it changes) what is
// the node's own, from its local file: the fleet section and node always;
// listen, api, anycast, rum and identity where the local file sets them, each
// replacing the pushed section whole. An identity set in neither is the
// node's name. (A prev passed to LoadAgain is such an overlaid cfg: the
// fields set here are set again on every call.)
func Overlay(cfg, local *config.Config) *config.Config {
	cfg.Fleet = local.Fleet
	cfg.Node = local.Node
	if local.Line("listen") > 0 {
		cfg.Listen = append([]string(nil), local.Listen...)
	}
	if local.Line("api") > 0 {
		cfg.API = local.API
	}
	if local.Anycast != nil {
		cfg.Anycast = local.Anycast
	}
	if local.RUM != nil {
		cfg.RUM = local.RUM
	}
	if local.Line("identity") > 0 || cfg.Identity == "" {
		cfg.Identity = local.Identity
	}
	// The addresses transfers and NOTIFYs go from are the node's own
	// (an anycast node's unicast address): set in its file, they win.
	if local.Line("transfers.transfer_source") > 0 {
		cfg.Transfers.TransferSource = local.Transfers.TransferSource
	}
	if local.Line("transfers.notify_source") > 0 {
		cfg.Transfers.NotifySource = local.Transfers.NotifySource
	}
	return cfg
}

// Applied records the outcome of serving bundle b (err nil: it is served).
func (m *Member) Applied(b fleet.Bundle, err error) {
	m.mu.Lock()
	save := false
	if err == nil {
		m.served = b
		if sameBundle(b, m.latest) || m.latest.Rev == 0 {
			// The newest is served; an older one served instead (the
			// newest failed at start) leaves the newest's error standing.
			m.applyErr, m.errOf = "", fleet.Bundle{}
		}
		// Only a bundle that was applied is kept: a restart after a push
		// that could not be applied serves what was served before.
		save = !sameBundle(b, m.kept)
		if save {
			m.kept = b
		}
	} else {
		if b.Meta.Digest == "" && b.Rev != 0 {
			b.Meta.Digest = b.Digest()
		}
		m.applyErr, m.errOf = err.Error(), b
	}
	m.mu.Unlock()
	if save {
		m.saveCache(b)
	}
	if err == nil {
		m.trafficChanged()
	}
	m.report()
}

// Start follows the bundle, keeps the node's status key, follows the
// fleet's overrides and, after ShareHealth, shares health, until ctx ends.
func (m *Member) Start(ctx context.Context) {
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.follow(ctx, fleet.ConfigPrefix(m.prefix), fleet.Handler{
			Snapshot: func(kvs []fleet.KV, rev int64) {
				m.mu.Lock()
				m.kvs = map[string]fleet.KV{}
				for _, kv := range kvs {
					m.kvs[kv.Key] = kv
				}
				m.mu.Unlock()
				m.changed()
			},
			Events: func(evs []fleet.Event, rev int64) {
				m.mu.Lock()
				for _, e := range evs {
					if e.Kind == fleet.EventDelete {
						delete(m.kvs, e.KV.Key)
					} else {
						m.kvs[e.KV.Key] = e.KV
					}
				}
				m.mu.Unlock()
				m.changed()
			},
			Progress: func(int64) {
				m.mu.Lock()
				m.viewAt = time.Now()
				m.mu.Unlock()
			},
			Error: func(err error) { m.log.Warn("fleet: following the configuration", "err", err) },
		})
	}()
	go func() {
		defer m.wg.Done()
		m.keepStatus(ctx)
	}()
	m.wg.Add(4)
	go func() {
		defer m.wg.Done()
		m.flushLoads(ctx)
	}()
	go func() {
		defer m.wg.Done()
		m.followOverrides(ctx, m.manager)
	}()
	go func() {
		defer m.wg.Done()
		m.watchStoreSize(ctx)
	}()
	go func() {
		defer m.wg.Done()
		m.flushPending(ctx)
	}()
	if m.health != nil {
		m.health.start(ctx)
	}
	m.startTraffic(ctx)
	if m.keyPlans != nil {
		m.keyPlans.start(ctx)
	}
	if m.serials != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.serials.follow(ctx)
		}()
	}
}

// changed rebuilds the bundle from the view and asks for a reload when it
// is a new one.
func (m *Member) changed() {
	m.mu.Lock()
	kvs := make([]fleet.KV, 0, len(m.kvs))
	for _, kv := range m.kvs {
		kvs = append(kvs, kv)
	}
	m.viewAt = time.Now()
	m.mu.Unlock()
	pub, err := fleet.PublishedOf(m.prefix, kvs)
	if err != nil {
		m.log.Error("fleet: the published bundle is incomplete; keeping the one served", "err", err)
		return
	}
	b := pub.For(m.local.Fleet.Node)
	m.mu.Lock()
	newer := !sameBundle(b, m.latest)
	// The same files as served (a promoted canary, a bundle pushed
	// again): nothing to reload, only what the status names changes.
	adopt := newer && b.Rev != 0 && m.served.Rev != 0 && b.Digest() == m.served.Digest()
	if newer {
		m.latest = b
	}
	if adopt {
		m.served, m.applyErr, m.errOf = b, "", fleet.Bundle{}
		if !sameBundle(b, m.kept) {
			m.kept = b
		} else {
			adopt = false
		}
	}
	m.mu.Unlock()
	switch {
	case adopt:
		m.saveCache(b)
		m.log.Info("fleet: a bundle with the files served is published; nothing to reload", "serial", b.Meta.Serial, "revision", b.Rev)
		m.report()
	case newer && b.Rev != 0:
		m.log.Info("fleet: a new bundle is published", "serial", b.Meta.Serial, "revision", b.Rev, "files", len(b.Files), "canary", b.Meta.Canary != nil)
		m.reload("fleet")
	}
}

// refreshPeriod is how often a node re-writes its status: lease_ttl/3.
// That write is the node's refresh: it keeps every observation the node
// published under the same lease live for the other nodes (quorum's
// Stale × refresh after they heard it), without re-writing them.
func refreshPeriod(local *config.Config) time.Duration {
	return time.Duration(local.Fleet.LeaseTTL) / 3
}

// sameBundle says whether a and b are one publication: the same meta
// key's revision, serial and place (canary or not).
func sameBundle(a, b fleet.Bundle) bool {
	return a.Rev == b.Rev && a.Meta.Serial == b.Meta.Serial && (a.Meta.Canary == nil) == (b.Meta.Canary == nil)
}

// keepStatus holds a lease and the node's status under it, granting a new
// lease whenever the old one is lost (the store was unreachable too long).
func (m *Member) keepStatus(ctx context.Context) {
	ttl := time.Duration(m.local.Fleet.LeaseTTL)
	m.mu.Lock()
	claimed := m.lease
	m.mu.Unlock()
	for ctx.Err() == nil {
		l, err := claimed, error(nil)
		claimed = nil
		if l == nil {
			l, err = m.grantAndClaim(ctx, ttl, false)
		}
		if err != nil {
			retry := 250 * time.Millisecond
			if errors.Is(err, ErrDuplicate) {
				// The store answers; another node has taken the name
				// while this one was cut off.
				m.log.Error("fleet: the node's status cannot be written", "err", err)
				retry = ttl
			} else {
				m.log.Warn("fleet: no lease for the node's status", "err", err)
				m.mu.Lock()
				m.failing = true
				m.mu.Unlock()
				m.resyncNow(false)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
				continue
			}
		}
		m.mu.Lock()
		m.lease = l
		m.mu.Unlock()
		m.report()
		if m.health != nil {
			m.health.poke() // the observations go under the new lease
		}
		// Re-written every refresh period (lease_ttl/3), so status shows
		// a live view age and the node's observations stay live; after a
		// failed write, every 250 ms, so a healed link shows at once.
		every := refreshPeriod(m.local)
		tick := time.NewTicker(every)
	held:
		for {
			select {
			case <-ctx.Done():
				tick.Stop()
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				l.Close(cctx) // the status goes at once, not after the TTL
				cancel()
				return
			case <-tick.C:
				if m.report() {
					tick.Reset(every)
				} else {
					tick.Reset(250 * time.Millisecond)
				}
			case <-l.Done():
				m.log.Warn("fleet: the node's lease was lost; granting a new one", "err", l.Err())
				m.resyncNow(false)
				break held
			}
		}
		tick.Stop()
	}
}

// ErrDuplicate says another running node has this node's name.
var ErrDuplicate = errors.New("the node name is in use")

// Claim takes the node's status key in the store, under a new lease, and
// fails with ErrDuplicate when another live node holds it (two nodes
// with one fleet.node would share their status and observation keys).
// A store that cannot be reached is no error:
// the claim is made when it answers. Call it before Start.
func (m *Member) Claim(ctx context.Context) error {
	ttl := time.Duration(m.local.Fleet.LeaseTTL)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(m.local.Fleet.Etcd.DialTimeout)+ttl+time.Second)
	defer cancel()
	l, err := m.grantAndClaim(ctx, ttl, true)
	if errors.Is(err, ErrDuplicate) {
		return err
	}
	if err != nil {
		m.log.Warn("fleet: the node's name cannot be claimed now; it will be when the store answers", "err", err)
		return nil
	}
	m.mu.Lock()
	m.lease = l
	m.mu.Unlock()
	return nil
}

// grantAndClaim grants a lease and writes the node's status under it if
// no other lease holds the key: a key held by the lease this node wrote
// under before (LeaseFile) is taken over; one held by another lease is
// waited for up to the lease TTL (a crashed node's lease expiring) when
// wait is set, and is then ErrDuplicate.
func (m *Member) grantAndClaim(ctx context.Context, ttl time.Duration, wait bool) (fleet.Lease, error) {
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	l, err := m.store.Grant(gctx, ttl)
	cancel()
	if err != nil {
		return nil, err
	}
	if err := m.claim(ctx, l, ttl, wait); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l.Close(cctx)
		cancel()
		return nil, err
	}
	if f := stateFile(m.stateDir, LeaseFile); f != "" {
		if err := os.WriteFile(f, []byte(strconv.FormatInt(l.ID(), 16)+"\n"), 0o600); err != nil {
			m.log.Warn("fleet: the node's lease could not be kept on disk", "file", f, "err", err)
		}
	}
	return l, nil
}

func (m *Member) claim(ctx context.Context, l fleet.Lease, ttl time.Duration, wait bool) error {
	node := m.local.Fleet.Node
	key := fleet.StatusKey(m.prefix, node)
	var mine int64
	if f := stateFile(m.stateDir, LeaseFile); f != "" {
		if data, err := os.ReadFile(f); err == nil {
			mine, _ = strconv.ParseInt(strings.TrimSpace(string(data)), 16, 64)
		}
	}
	deadline := time.Now().Add(ttl + time.Second)
	for {
		data, _ := json.Marshal(m.status())
		ok, _, err := m.store.Txn(ctx, []fleet.Cmp{fleet.Absent(key)}, []fleet.KV{{Key: key, Value: data, Lease: l.ID()}}, nil)
		if err != nil || ok {
			return err
		}
		kvs, _, err := m.store.Get(ctx, key)
		if err != nil {
			return err
		}
		var held *fleet.KV
		for i := range kvs {
			if kvs[i].Key == key {
				held = &kvs[i]
			}
		}
		switch {
		case held == nil:
			continue // it went meanwhile
		case held.Lease == l.ID():
			return nil
		case mine != 0 && held.Lease == mine:
			// This node's own status from before a crash or a lost lease.
			m.log.Info("fleet: taking over this node's status from its previous lease", "lease", fmt.Sprintf("%x", mine))
			if _, _, err := m.store.Txn(ctx, []fleet.Cmp{fleet.ModRevIs(key, held.Rev)}, nil, []string{key}); err != nil {
				return err
			}
			continue
		}
		if wait && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		var other fleet.Status
		json.Unmarshal(held.Value, &other)
		who := fmt.Sprintf("lease %x", held.Lease)
		if !other.Since.IsZero() {
			who += fmt.Sprintf(", running since %s", other.Since.UTC().Format(time.RFC3339))
		}
		if other.Version != "" {
			who += ", version " + other.Version
		}
		if other.Region != "" {
			who += ", region " + other.Region
		}
		return fmt.Errorf("fleet: node %q: %w: another live node holds %s (%s); give each node its own fleet.node", node, ErrDuplicate, key, who)
	}
}

// status is what the node says of itself now.
func (m *Member) status() fleet.Status {
	mode, _ := m.HealthMode(time.Now())
	id := m.identity()
	m.mu.Lock()
	defer m.mu.Unlock()
	return fleet.Status{
		Node: m.local.Fleet.Node, Region: m.local.Fleet.Region,
		Serial: m.served.Meta.Serial, Rev: m.served.Rev, Digest: m.servedDigest(), Canary: m.served.Meta.Canary != nil,
		Error: m.applyErr, ErrorRev: m.errOf.Rev, ErrorSerial: m.errOf.Meta.Serial, ErrorDigest: m.errOf.Meta.Digest,
		ViewAt: m.viewAt, Version: m.version, Since: m.since, Warning: m.storeWarning, Pending: m.waiting(), PendingLoads: len(m.pendingLoads),
		HealthMode: mode, NodeName: id.NodeName, Country: id.Country, Lat: id.Lat, Lon: id.Lon,
	}
}

// storeSizeEvery is how often a node reads the store's database size.
const storeSizeEvery = time.Minute

// watchStoreSize reads the store's database size every storeSizeEvery
// (the first time at once) and warns, in the log, the node's status and
// its metrics, when it passes half of fleet.etcd.quota_backend_bytes (at
// the quota etcd raises NOSPACE and refuses every write: pushes,
// statuses, observations), or when a member has an alarm.
func (m *Member) watchStoreSize(ctx context.Context) {
	sz, ok := m.store.(fleet.Sizer)
	if !ok {
		return
	}
	every := m.sizeEvery
	if every <= 0 {
		every = storeSizeEvery
	}
	quota := m.local.Fleet.Etcd.QuotaBackendBytes
	var warnedAt time.Time
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := sz.DBStatus(cctx)
		cancel()
		if err == nil {
			warning := ""
			if quota > 0 && st.Bytes > quota/2 {
				warning = fmt.Sprintf("etcd database %s of %s quota (%d%%; %s in use): compact and defragment, or raise --quota-backend-bytes and fleet.etcd.quota_backend_bytes",
					mib(st.Bytes), mib(quota), 100*st.Bytes/quota, mib(st.InUse))
			}
			if len(st.Alarms) > 0 {
				warning = strings.TrimPrefix(warning+"; etcd alarms: "+strings.Join(st.Alarms, ", "), "; ")
			}
			m.mu.Lock()
			m.db = st
			was := m.storeWarning
			m.storeWarning = warning
			m.mu.Unlock()
			switch {
			case warning != "" && (was == "" || time.Since(warnedAt) >= time.Hour):
				m.log.Warn("fleet: the store's database passes half its quota (or has an alarm)", "warning", warning,
					"db_bytes", st.Bytes, "in_use_bytes", st.InUse, "quota_bytes", quota, "member", st.Member)
				warnedAt = time.Now()
				m.report()
			case warning == "" && was != "":
				m.log.Info("fleet: the store's database is back under half its quota", "db_bytes", st.Bytes, "quota_bytes", quota)
				m.report()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// mib renders a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// report writes the node's status under its lease (when it has one) and
// says whether the store took it.
func (m *Member) report() bool {
	st := m.status()
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return false
	}
	data, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := l.Put(ctx, fleet.StatusKey(m.prefix, st.Node), data); err != nil {
		if !errors.Is(err, context.Canceled) {
			m.log.Warn("fleet: the node's status was not written", "err", err)
			m.mu.Lock()
			m.failing = true
			m.mu.Unlock()
			m.resyncNow(false)
		}
		return false
	}
	// The store answered and the watch runs: the view is current.
	m.mu.Lock()
	m.viewAt = time.Now()
	back := m.failing
	m.failing = false
	m.mu.Unlock()
	if back {
		// Reads and watches started while the link was down may wait on
		// a dead connection: start them again now that it works.
		m.log.Info("fleet: the store answers again; following it afresh")
		m.resyncNow(true)
		for _, kick := range []chan struct{}{m.flushKick, m.loadKick} {
			select {
			case kick <- struct{}{}: // and write what is pending
			default:
			}
		}
	}
	return true
}

// servedDigest is the served bundle's digest (m.mu held).
func (m *Member) servedDigest() string {
	if m.served.Rev == 0 {
		return ""
	}
	if m.served.Meta.Digest == "" {
		m.served.Meta.Digest = m.served.Digest()
	}
	return m.served.Meta.Digest
}

// Close waits for the follower and the status keeper (ctx has ended)
// and closes the store.
func (m *Member) Close() {
	m.wg.Wait()
	m.store.Close()
}

var _ fs.FS = fleet.Bundle{}.FS(nil)
