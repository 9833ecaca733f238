// Package traffic counts what the steered answers gave out, per record:
// answers per pool, decisions per rule, ECS scope lengths returned, and
// keeps them over sliding windows (the last 5 minutes and hour) for the
// dashboard. In a fleet the windows of every node are summed.
//
// SEAM (issue 28): the signatures below are what the node and the API
// use; the traffic helper implements them.
package traffic

import (
	"time"

	"github.com/steer-dns/steer/internal/policy"
)

// Record describes one steered record to SetRecords, in the order of the
// compiled table's indexes (policy.Record.Index).
type Record struct {
	Name  string // canonical owner name
	Pools []string
	Rules int
}

// Recorder holds the counters and their windows.
type Recorder struct{}

// New returns an empty recorder.
func New() *Recorder { return &Recorder{} }

// SetRecords renumbers the counters for a new table; the windows of
// records (and pools, rules) that keep their names carry over.
func (r *Recorder) SetRecords(recs []Record) {}

// Answer counts one answer of record naming pool (a policy.Hooks.Observe
// step): no lock, no allocation.
func (r *Recorder) Answer(record, pool int) {}

// Decided counts one decision of record: its rule and the ECS scope
// returned (d.Scope, widened when d.WidenedFrom != 0). No lock, no
// allocation.
func (r *Recorder) Decided(record int, d *policy.Decision, v6 bool) {}

// Counts is one record's counts over a window.
type Counts struct {
	Pools map[string]uint64 // answers naming each pool
	Rules []uint64          // decisions by rule (0-based)
	// Scopes4[len] and Scopes6[len] count answers by scope length;
	// Widened4/6 those whose scope health widened.
	Scopes4            [33]uint64
	Scopes6            [129]uint64
	Widened4, Widened6 uint64
	Answers            uint64 // answers of the record
}

// Window is the counts over the last Span as of At; Covered is how much
// of Span the history covers.
type Window struct {
	Span, Covered time.Duration
	At            time.Time
	// Nodes is how many nodes' counts are summed (1 off a fleet).
	Nodes int
}

// Window returns the window ending now over span (5m or 1h).
func (r *Recorder) Window(span time.Duration) *Window { return &Window{Span: span, Nodes: 1} }

// Record returns name's counts in w; ok is false for a record with no
// counts at all.
func (w *Window) Record(name string) (c Counts, ok bool) { return Counts{}, false }
