package node

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/querylog"
)

// queryLog keeps the query log as configured: a reload opens, closes,
// moves or re-samples it, and reopens the file (rotation by rename).
type queryLog struct {
	log *slog.Logger
	h   *dnsserver.Handler

	mu   sync.Mutex
	cur  *querylog.Log
	path string // resolved; "" when off
	c    config.QueryLog
}

func newQueryLog(log *slog.Logger, h *dnsserver.Handler, reg prometheus.Registerer) *queryLog {
	q := &queryLog{log: log, h: h}
	reg.MustRegister(querylog.NewCollector(func() *querylog.Log {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.cur
	}))
	return q
}

func resolveLogPath(cfg *config.Config) string {
	p := cfg.QueryLog.Path
	if p != "" && p != "stdout" {
		p = cfg.LocalPath(p)
	}
	return p
}

// qlChange is a prepared change of the query log: commit applies it,
// abort undoes what prepare opened.
type qlChange struct {
	q      *queryLog
	opened *querylog.Log // a new log to swap in (nil: keep or close)
	path   string
	c      config.QueryLog
}

// prepare opens what cfg's query log needs (a new file, when the path
// changed or the log was off) without applying it: a file that cannot be
// opened rejects the reload with nothing changed. dry (steer check) opens
// nothing: the file's directory must exist.
func (q *queryLog) prepare(cfg *config.Config, dry bool) (*qlChange, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch := &qlChange{q: q, path: resolveLogPath(cfg), c: cfg.QueryLog}
	if dry && ch.path != "" && ch.path != "stdout" {
		if fi, err := os.Stat(filepath.Dir(ch.path)); err != nil || !fi.IsDir() {
			return nil, problem(cfg, "query_log.path", "query_log: the directory of %s does not exist", ch.path)
		}
		return ch, nil
	}
	if ch.path != "" && (q.cur == nil || ch.path != q.path) {
		l, err := querylog.Open(querylog.Options{Path: ch.path, Sample: cfg.QueryLog.Sample, Log: q.log})
		if err != nil {
			return nil, problem(cfg, "query_log.path", "query_log: %v", err)
		}
		ch.opened = l
	}
	return ch, nil
}

func (c *qlChange) abort() {
	if c != nil && c.opened != nil {
		c.opened.Close()
	}
}

// commit swaps the prepared log in, re-samples a kept one and reopens its
// file (so a reload after logrotate's rename writes a new file). It
// returns what changed.
func (c *qlChange) commit() []string {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	var changed []string
	old := q.cur
	switch {
	case c.opened != nil:
		q.cur = c.opened
		q.h.SetQueryLog(q.cur)
		if old != nil {
			changed = append(changed, fmt.Sprintf("query_log.path %s -> %s", q.path, c.path))
			old.Close()
		}
	case c.path == "" && old != nil:
		q.h.SetQueryLog(nil)
		old.Close()
		q.cur = nil
		changed = append(changed, "query_log off")
	case old != nil:
		if c.c.Sample != q.c.Sample {
			if err := old.SetSample(c.c.Sample); err != nil {
				q.log.Error("query log: sample not changed", "err", err)
			} else {
				changed = append(changed, fmt.Sprintf("query_log.sample %g -> %g", q.c.Sample, c.c.Sample))
			}
		}
		if err := old.Reopen(); err != nil {
			q.log.Error("query log not reopened", "path", q.path, "err", err)
		}
	}
	q.path, q.c = c.path, c.c
	return changed
}

// reopen reopens the file (SIGUSR1).
func (q *queryLog) reopen() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur == nil {
		return nil
	}
	return q.cur.Reopen()
}

func (q *queryLog) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil {
		q.cur.Close()
		q.cur = nil
	}
}
