package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
)

// fleetWiring makes the node one of a fleet: its configuration and zones
// come from the bundle published in the store (steer fleet push), which
// it follows and applies through the one reload path, and it reports what
// it serves under its own lease. The local file holds only the fleet
// section and, optionally, listen and anycast, which override the
// bundle's. The last bundle is kept on disk, so a node restarted while
// the store is unreachable serves what it served before. The query path
// never reads the store.
type fleetWiring struct {
	n      *Node
	local  *config.Config
	store  fleet.Store
	prefix string
	cache  string // where the last bundle is kept

	mu       sync.Mutex
	kvs      map[string]fleet.KV // the view of P/config/
	latest   fleet.Bundle        // the newest complete bundle seen
	served   fleet.Bundle        // the bundle the node serves
	applyErr string              // why latest is not served
	errRev   int64
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
}

// resyncNow makes every follower start its watch again (at most once a
// second, unless forced: the link just came back).
func (fw *fleetWiring) resyncNow(force bool) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if !force && time.Since(fw.lastRe) < time.Second {
		return
	}
	fw.lastRe = time.Now()
	close(fw.resync)
	fw.resync = make(chan struct{})
}

// follow runs fleet.Follow on prefix until ctx ends, starting it again
// whenever resyncNow is called.
func (fw *fleetWiring) follow(ctx context.Context, prefix string, h fleet.Handler) {
	for ctx.Err() == nil {
		fw.mu.Lock()
		ch := fw.resync
		fw.mu.Unlock()
		child, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-ch:
				cancel()
			case <-child.Done():
			}
		}()
		fleet.Follow(child, fw.store, prefix, h)
		cancel()
	}
}

// openFleet opens the store named by the local file's fleet section (no
// I/O yet, unless etcd authentication is set) and reads the bundle to
// start from: the store's, or the cached one when the store cannot be
// read within the dial timeout.
func openFleet(n *Node, local *config.Config) (*fleetWiring, error) {
	f := local.Fleet
	ec := fleet.EtcdConfig{
		Endpoints:   f.Etcd.Endpoints,
		DialTimeout: time.Duration(f.Etcd.DialTimeout),
		Username:    f.Etcd.Username,
	}
	if f.Etcd.TLS.CA != "" {
		ec.CAFile = local.Resolve(f.Etcd.TLS.CA)
	}
	if f.Etcd.TLS.Cert != "" {
		ec.CertFile, ec.KeyFile = local.Resolve(f.Etcd.TLS.Cert), local.Resolve(f.Etcd.TLS.Key)
	}
	ec.Password = f.Etcd.Password.Value() // read with the configuration
	s, err := fleet.OpenEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	fw := &fleetWiring{n: n, local: local, store: s, prefix: f.Etcd.Prefix, kvs: map[string]fleet.KV{},
		cache: fleetCacheFile(local), since: time.Now(), resync: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(f.Etcd.DialTimeout))
	defer cancel()
	b, err := fleet.ReadBundle(ctx, s, fw.prefix)
	switch {
	case err == nil && b.Rev != 0:
		fw.latest, fw.viewAt = b, time.Now()
		fw.saveCache(b)
	case err == nil:
		fw.viewAt = time.Now()
		n.log.Warn("fleet: nothing published yet: serving the local file alone until steer fleet push", "prefix", fw.prefix)
	default:
		n.log.Error("fleet: the store cannot be read; starting from the last bundle kept on disk", "err", err, "cache", fw.cache)
		if cb, cerr := fw.loadCache(); cerr == nil {
			fw.latest = cb
		} else {
			n.log.Warn("fleet: no bundle kept on disk either: serving the local file alone", "err", cerr)
		}
	}
	return fw, nil
}

// fleetCacheFile is beside the local health state file when one is set,
// else beside the local file.
func fleetCacheFile(local *config.Config) string {
	dir := filepath.Dir(local.File)
	if local.Health.StateFile != "" {
		dir = filepath.Dir(local.Resolve(local.Health.StateFile))
	}
	return filepath.Join(dir, "steer-fleet-bundle.json")
}

type cachedBundle struct {
	Meta  fleet.Meta        `json:"meta"`
	Rev   int64             `json:"rev"`
	Files map[string][]byte `json:"files"`
}

func (fw *fleetWiring) saveCache(b fleet.Bundle) {
	data, err := json.Marshal(cachedBundle{Meta: b.Meta, Rev: b.Rev, Files: b.Files})
	if err == nil {
		tmp := fw.cache + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, fw.cache)
		}
	}
	if err != nil {
		fw.n.log.Warn("fleet: the bundle could not be kept on disk", "file", fw.cache, "err", err)
	}
}

func (fw *fleetWiring) loadCache() (fleet.Bundle, error) {
	data, err := os.ReadFile(fw.cache)
	if err != nil {
		return fleet.Bundle{}, err
	}
	var c cachedBundle
	if err := json.Unmarshal(data, &c); err != nil {
		return fleet.Bundle{}, fmt.Errorf("%s: %v", fw.cache, err)
	}
	return fleet.Bundle{Meta: c.Meta, Rev: c.Rev, Files: c.Files}, nil
}

// config is the configuration to serve: the newest bundle's, with the
// local file's fleet section and node identity and, where the local file
// sets them, listen and anycast; the local file alone before anything was published.
func (fw *fleetWiring) config(prev *config.Config) (*config.Config, fleet.Bundle, error) {
	fw.mu.Lock()
	b := fw.latest
	fw.mu.Unlock()
	if b.Rev == 0 {
		return fw.local, b, nil
	}
	// Files the bundle does not carry (geo databases, latency and feed
	// files) are read from the node's disk by their absolute paths.
	fsys := b.FS(os.DirFS("/"))
	cfg, _, err := config.LoadAgain(fsys, fleet.ConfigName, prev)
	if err != nil {
		return nil, b, fmt.Errorf("fleet bundle serial %d (revision %d): %w", b.Meta.Serial, b.Rev, err)
	}
	cfg.Fleet = fw.local.Fleet
	// The node's identity is the local file's (node:, or the fleet
	// section's node and region), never the shared bundle's.
	cfg.Node = fw.local.Node
	if fw.local.Line("listen") > 0 {
		cfg.Listen = append([]string(nil), fw.local.Listen...)
	}
	if fw.local.Anycast != nil {
		cfg.Anycast = fw.local.Anycast
	}
	return cfg, b, nil
}

// applied records the outcome of serving bundle b (err nil: it is served).
func (fw *fleetWiring) applied(b fleet.Bundle, err error) {
	fw.mu.Lock()
	if err == nil {
		fw.served, fw.applyErr, fw.errRev = b, "", 0
	} else {
		fw.applyErr, fw.errRev = err.Error(), b.Rev
	}
	fw.mu.Unlock()
	fw.report()
}

// start follows the bundle and keeps the node's status key until ctx ends.
func (fw *fleetWiring) start(ctx context.Context) {
	fw.wg.Add(2)
	go func() {
		defer fw.wg.Done()
		fw.follow(ctx, fleet.ConfigPrefix(fw.prefix), fleet.Handler{
			Snapshot: func(kvs []fleet.KV, rev int64) {
				fw.mu.Lock()
				fw.kvs = map[string]fleet.KV{}
				for _, kv := range kvs {
					fw.kvs[kv.Key] = kv
				}
				fw.mu.Unlock()
				fw.changed()
			},
			Events: func(evs []fleet.Event, rev int64) {
				fw.mu.Lock()
				for _, e := range evs {
					if e.Kind == fleet.EventDelete {
						delete(fw.kvs, e.KV.Key)
					} else {
						fw.kvs[e.KV.Key] = e.KV
					}
				}
				fw.mu.Unlock()
				fw.changed()
			},
			Progress: func(int64) {
				fw.mu.Lock()
				fw.viewAt = time.Now()
				fw.mu.Unlock()
			},
			Error: func(err error) { fw.n.log.Warn("fleet: following the configuration", "err", err) },
		})
	}()
	go func() {
		defer fw.wg.Done()
		fw.keepStatus(ctx)
	}()
	fw.wg.Add(1)
	go func() {
		defer fw.wg.Done()
		fw.followOverrides(ctx, fw.n.hc.manager)
	}()
}

// changed rebuilds the bundle from the view and asks for a reload when it
// is a new one.
func (fw *fleetWiring) changed() {
	fw.mu.Lock()
	kvs := make([]fleet.KV, 0, len(fw.kvs))
	for _, kv := range fw.kvs {
		kvs = append(kvs, kv)
	}
	fw.viewAt = time.Now()
	fw.mu.Unlock()
	b, err := fleet.BundleOf(fw.prefix, kvs)
	if err != nil {
		fw.n.log.Error("fleet: the published bundle is incomplete; keeping the one served", "err", err)
		return
	}
	fw.mu.Lock()
	newer := b.Rev != fw.latest.Rev
	if newer {
		fw.latest = b
	}
	fw.mu.Unlock()
	if newer && b.Rev != 0 {
		fw.saveCache(b)
		fw.n.log.Info("fleet: a new bundle is published", "serial", b.Meta.Serial, "revision", b.Rev, "files", len(b.Files))
		fw.n.RequestReload("fleet")
	}
}

// keepStatus holds a lease and the node's status under it, granting a new
// lease whenever the old one is lost (the store was unreachable too long).
func (fw *fleetWiring) keepStatus(ctx context.Context) {
	ttl := time.Duration(fw.local.Fleet.LeaseTTL)
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := fw.store.Grant(gctx, ttl)
		cancel()
		if err != nil {
			fw.n.log.Warn("fleet: no lease for the node's status", "err", err)
			fw.mu.Lock()
			fw.failing = true
			fw.mu.Unlock()
			fw.resyncNow(false)
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
				continue
			}
		}
		fw.mu.Lock()
		fw.lease = l
		fw.mu.Unlock()
		fw.report()
		// Re-written every half TTL, so status shows a live view age; after
		// a failed write, every 250 ms, so a healed link shows at once.
		tick := time.NewTicker(ttl / 2)
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
				if fw.report() {
					tick.Reset(ttl / 2)
				} else {
					tick.Reset(250 * time.Millisecond)
				}
			case <-l.Done():
				fw.n.log.Warn("fleet: the node's lease was lost; granting a new one", "err", l.Err())
				fw.resyncNow(false)
				break held
			}
		}
		tick.Stop()
	}
}

// report writes the node's status under its lease (when it has one) and
// says whether the store took it.
func (fw *fleetWiring) report() bool {
	fw.mu.Lock()
	l := fw.lease
	st := fleet.Status{
		Node: fw.local.Fleet.Node, Region: fw.local.Fleet.Region,
		Serial: fw.served.Meta.Serial, Rev: fw.served.Rev,
		Error: fw.applyErr, ErrorRev: fw.errRev,
		ViewAt: fw.viewAt, Version: fw.n.opts.Version, Since: fw.since,
	}
	fw.mu.Unlock()
	if l == nil {
		return false
	}
	data, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := l.Put(ctx, fleet.StatusKey(fw.prefix, st.Node), data); err != nil {
		if !errors.Is(err, context.Canceled) {
			fw.n.log.Warn("fleet: the node's status was not written", "err", err)
			fw.mu.Lock()
			fw.failing = true
			fw.mu.Unlock()
			fw.resyncNow(false)
		}
		return false
	}
	// The store answered and the watch runs: the view is current.
	fw.mu.Lock()
	fw.viewAt = time.Now()
	back := fw.failing
	fw.failing = false
	fw.mu.Unlock()
	if back {
		// Reads and watches started while the link was down may wait on
		// a dead connection: start them again now that it works.
		fw.n.log.Info("fleet: the store answers again; following it afresh")
		fw.resyncNow(true)
	}
	return true
}

// close waits for the follower and the status keeper (ctx has ended)
// and closes the store.
func (fw *fleetWiring) close() {
	fw.wg.Wait()
	fw.store.Close()
}

var _ fs.FS = fleet.Bundle{}.FS(nil)
