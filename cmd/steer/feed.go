package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/health"
)

// feedFile is the external state feed (health.feed_file):
//
//	{"targets": {"192.0.2.10": {"state": "drain", "expires": "30m"}},
//	 "pools":   {"shop.example.com/eu-central": {"state": "down", "expires": "2026-12-01T00:00:00Z"}}}
//
// expires is a Go duration (from when the file is read) or an RFC 3339
// time; omitted means no expiry. Entries that disappear from the file are
// set back to auto.
type feedFile struct {
	Targets map[string]feedEntry `json:"targets"`
	Pools   map[string]feedEntry `json:"pools"`
}

type feedEntry struct {
	State   string `json:"state"`
	Expires string `json:"expires"`
}

// feed applies the feed file to the health wiring.
type feed struct {
	path string
	hc   *healthWiring
	log  *slog.Logger

	mu      sync.Mutex
	targets map[netip.Addr]bool // set by the feed last time
	pools   map[[2]string]bool
}

func parseExpires(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("expires %q is neither a duration such as 30m nor an RFC 3339 time", s)
	}
	return t, nil
}

// load reads the feed and applies it whole, or, if any entry is bad,
// applies nothing and reports every problem.
func (f *feed) load() error {
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
	type target struct {
		o   health.Override
		exp time.Time
	}
	type pool struct {
		o   health.Override
		exp time.Time
	}
	targets := map[netip.Addr]target{}
	pools := map[[2]string]pool{}
	var probs []string
	for a, e := range ff.Targets {
		addr, err := netip.ParseAddr(a)
		o, err2 := health.ParseOverride(strings.ToLower(e.State))
		exp, err3 := parseExpires(e.Expires, now)
		if err := errors.Join(err, err2, err3); err != nil {
			probs = append(probs, fmt.Sprintf("targets[%q]: %v", a, err))
			continue
		}
		targets[addr.Unmap()] = target{o, exp}
	}
	for k, e := range ff.Pools {
		rec, name, ok := strings.Cut(k, "/")
		o, err := health.ParseOverride(strings.ToLower(e.State))
		exp, err2 := parseExpires(e.Expires, now)
		switch {
		case !ok || rec == "" || name == "":
			probs = append(probs, fmt.Sprintf("pools[%q]: write record/pool", k))
		case err != nil || err2 != nil:
			probs = append(probs, fmt.Sprintf("pools[%q]: %v", k, errors.Join(err, err2)))
		default:
			pools[[2]string{dns.CanonicalName(rec), name}] = pool{o, exp}
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%s: %s", f.path, strings.Join(probs, "; "))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for a := range f.targets {
		if _, still := targets[a]; !still {
			f.hc.manager.SetOverride(a, health.OverrideNone, time.Time{})
		}
	}
	for k := range f.pools {
		if _, still := pools[k]; !still {
			f.hc.setPool(k[0], k[1], health.OverrideNone, time.Time{})
		}
	}
	f.targets, f.pools = map[netip.Addr]bool{}, map[[2]string]bool{}
	for a, t := range targets {
		f.hc.manager.SetOverride(a, t.o, t.exp)
		f.targets[a] = true
	}
	for k, p := range pools {
		f.hc.setPool(k[0], k[1], p.o, p.exp)
		f.pools[k] = true
	}
	f.log.Info("health feed applied", "file", f.path, "targets", len(targets), "pools", len(pools))
	return nil
}
