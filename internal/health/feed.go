package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// feedFile is the external state feed (feed_file):
//
//	{"targets": {"192.0.2.10": {"state": "drain", "expires": "30m"}},
//	 "pools":   {"shop.example.com/eu-central": {"state": "down", "expires": "2026-12-01T00:00:00Z"}}}
//
// expires is read by ParseExpires, as the admin API reads it, with
// the file's modification time for now: a positive Go duration from then
// (so reading the same file again after a restart keeps the expiry) or an
// RFC 3339 time after then; omitted means no expiry. Entries that disappear from the file are
// set back to auto.
type feedFile struct {
	Targets map[string]feedEntry `json:"targets"`
	Pools   map[string]feedEntry `json:"pools"`
}

type feedEntry struct {
	State   string `json:"state"`
	Expires string `json:"expires"`
}

// Feed applies a feed file (the configuration's feed_file) to a
// Manager's overrides: read whole and applied whole, or rejected whole
// with the file and every reason while the previous feed stays.
type Feed struct {
	log     *slog.Logger
	manager *Manager
	served  func() Served // what the entries must name

	mu      sync.Mutex
	path    string // "" when none
	stamp   stamp
	targets map[netip.Addr]bool // set by the feed last time
	pools   map[[2]string]bool
}

// Served is what a feed's entries must name: the target addresses of the
// served pools, and Pool, which returns a served record's canonical name
// when it has the pool, or an error saying what is unknown.
type Served struct {
	Targets map[netip.Addr]bool
	Pool    func(record, pool string) (string, error)
}

// NewFeed returns a feed setting m's overrides, with no file yet.
func NewFeed(log *slog.Logger, m *Manager, served func() Served) *Feed {
	return &Feed{log: log, manager: m, served: served}
}

// stamp is what Changed compares: a file replaced or rewritten changes
// its modification time or size.
type stamp struct {
	mod  time.Time
	size int64
}

func stampOf(p string) stamp {
	fi, err := os.Stat(p)
	if err != nil {
		return stamp{}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

// SetPath makes the feed read path ("" for none; a reload may add, move
// or drop it) and reads it. It returns the path read before.
func (f *Feed) SetPath(path string) (old string) {
	f.mu.Lock()
	old, f.path = f.path, path
	f.mu.Unlock()
	f.Poll()
	return old
}

// Changed reports whether the file differs from the one last read.
func (f *Feed) Changed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path != "" && stampOf(f.path) != f.stamp
}

// Poll reads the file when it changed and applies it; a rejected feed is
// logged and the previous one stays.
func (f *Feed) Poll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == "" {
		f.clearLocked()
		return
	}
	st := stampOf(f.path)
	if st == f.stamp && f.targets != nil {
		return
	}
	// The stamp is taken before the read: a change racing the read is
	// seen again at the next poll.
	f.stamp = st
	if err := f.loadLocked(); err != nil {
		f.log.Error("health feed rejected; the previous one stays", "file", f.path, "err", err)
	}
}

// clearLocked sets back to auto whatever the feed had set.
func (f *Feed) clearLocked() {
	m := f.manager
	for a := range f.targets {
		m.SetOverride(a, OverrideNone, time.Time{})
	}
	for k := range f.pools {
		m.SetPoolOverride(k[0], k[1], OverrideNone, time.Time{})
	}
	f.targets, f.pools = nil, nil
}

// loadLocked reads the feed and applies it whole, or, if any entry is bad
// (a bad state or expiry, an address that is no pool's target, a record
// or pool that is not served), applies nothing and reports every problem.
func (f *Feed) loadLocked() error {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		data = []byte("{}")
	} else if err != nil {
		return err
	}
	var ff feedFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ff); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	now := time.Now()
	if fi, err := os.Stat(f.path); err == nil {
		now = fi.ModTime()
	}
	type target struct {
		o   Override
		exp time.Time
	}
	type pool struct {
		o   Override
		exp time.Time
	}
	targets := map[netip.Addr]target{}
	pools := map[[2]string]pool{}
	var probs []string
	served := f.served()
	for a, e := range ff.Targets {
		addr, err := netip.ParseAddr(a)
		o, err2 := ParseOverride(strings.ToLower(e.State))
		exp, err3 := ParseExpires(e.Expires, now)
		if err := errors.Join(err, err2, err3); err != nil {
			probs = append(probs, fmt.Sprintf("targets[%q]: %v", a, err))
			continue
		}
		if !served.Targets[addr.Unmap()] {
			probs = append(probs, fmt.Sprintf("targets[%q]: no pool of the served records has this address", a))
			continue
		}
		targets[addr.Unmap()] = target{o, exp}
	}
	for k, e := range ff.Pools {
		rec, name, ok := strings.Cut(k, "/")
		o, err := ParseOverride(strings.ToLower(e.State))
		exp, err2 := ParseExpires(e.Expires, now)
		switch {
		case !ok || rec == "" || name == "":
			probs = append(probs, fmt.Sprintf("pools[%q]: write record/pool", k))
		case err != nil || err2 != nil:
			probs = append(probs, fmt.Sprintf("pools[%q]: %v", k, errors.Join(err, err2)))
		default:
			canon, err := served.Pool(rec, name)
			if err != nil {
				probs = append(probs, fmt.Sprintf("pools[%q]: %v", k, err))
				continue
			}
			pools[[2]string{canon, name}] = pool{o, exp}
		}
	}
	if len(probs) > 0 {
		sort.Strings(probs)
		return fmt.Errorf("%s: %s", f.path, strings.Join(probs, "; "))
	}
	m := f.manager
	for a := range f.targets {
		if _, still := targets[a]; !still {
			m.SetOverride(a, OverrideNone, time.Time{})
		}
	}
	for k := range f.pools {
		if _, still := pools[k]; !still {
			m.SetPoolOverride(k[0], k[1], OverrideNone, time.Time{})
		}
	}
	f.targets, f.pools = map[netip.Addr]bool{}, map[[2]string]bool{}
	for a, t := range targets {
		m.SetOverride(a, t.o, t.exp)
		f.targets[a] = true
	}
	for k, p := range pools {
		m.SetPoolOverride(k[0], k[1], p.o, p.exp)
		f.pools[k] = true
	}
	f.log.Info("health feed applied", "file", f.path, "targets", len(targets), "pools", len(pools))
	return nil
}
