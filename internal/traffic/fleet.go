package traffic

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// In a fleet each node publishes its own 5m and 1h windows (Publish) and
// reads every other node's (SetFleet); Window then sums them all. What is
// published is keyed by record and pool names, so nodes serving different
// bundles (a canary) sum what they share. It is gzip'd JSON of the
// non-zero counts alone, at most MaxPublished bytes: beyond, the records
// least answered over the hour are left out (Published.Dropped says how
// many), so a fleet's sum misses only the quietest records of a node with
// very many. Another node's counts are as of its last publication (every
// 30 s), the node's own as of its last sample.

// MaxPublished bounds a node's published windows, compressed.
const MaxPublished = 256 << 10

// Published is one node's windows as published.
type Published struct {
	Node    string          `json:"node"`
	At      time.Time       `json:"at"`
	Windows []PublishedSpan `json:"windows"`
	// Dropped is how many records with counts were left out to keep
	// under MaxPublished.
	Dropped int `json:"dropped,omitempty"`
}

// PublishedSpan is one window of a node.
type PublishedSpan struct {
	Span    time.Duration          `json:"span"`
	Covered time.Duration          `json:"covered"`
	Records map[string]*wireCounts `json:"records"`
}

// wireCounts is a record's Counts, only what is non-zero.
type wireCounts struct {
	A  uint64      `json:"a"`
	PN []string    `json:"pn,omitempty"` // pools answered
	PC []uint64    `json:"pc,omitempty"` // and their answers
	R  []uint64    `json:"r,omitempty"`  // decisions by rule
	S4 [][2]uint64 `json:"s4,omitempty"` // [scope length, answers]
	S6 [][2]uint64 `json:"s6,omitempty"`
	W4 uint64      `json:"w4,omitempty"`
	W6 uint64      `json:"w6,omitempty"`
}

func toWire(c *Counts) *wireCounts {
	w := &wireCounts{A: c.Answers, W4: c.Widened4, W6: c.Widened6}
	names := make([]string, 0, len(c.Pools))
	for p, n := range c.Pools {
		if n != 0 {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	for _, p := range names {
		w.PN, w.PC = append(w.PN, p), append(w.PC, c.Pools[p])
	}
	last := len(c.Rules)
	for last > 0 && c.Rules[last-1] == 0 {
		last--
	}
	w.R = slices.Clone(c.Rules[:last])
	for l, n := range c.Scopes4 {
		if n != 0 {
			w.S4 = append(w.S4, [2]uint64{uint64(l), n})
		}
	}
	for l, n := range c.Scopes6 {
		if n != 0 {
			w.S6 = append(w.S6, [2]uint64{uint64(l), n})
		}
	}
	return w
}

// addWire sums o into c: pools by name (those c has), rules by position.
func (c *Counts) addWire(o *wireCounts) {
	for i, p := range o.PN {
		if _, ok := c.Pools[p]; ok && i < len(o.PC) {
			c.Pools[p] += o.PC[i]
		}
	}
	for k, n := range o.R {
		if k < len(c.Rules) {
			c.Rules[k] += n
		}
	}
	for _, s := range o.S4 {
		if s[0] < uint64(len(c.Scopes4)) {
			c.Scopes4[s[0]] += s[1]
		}
	}
	for _, s := range o.S6 {
		if s[0] < uint64(len(c.Scopes6)) {
			c.Scopes6[s[0]] += s[1]
		}
	}
	c.Widened4 += o.W4
	c.Widened6 += o.W6
	c.Answers += o.A
}

// publishSpans are the windows a node publishes.
var publishSpans = [2]time.Duration{fineSpan, coarseSpan}

// Publish encodes the node's own 5m and 1h windows for the other nodes,
// at most MaxPublished bytes; dropped is how many records were left out.
func (r *Recorder) Publish(node string) (data []byte, dropped int, err error) {
	return r.publish(node, MaxPublished)
}

func (r *Recorder) publish(node string, limit int) (data []byte, dropped int, err error) {
	var ws [2]*Window
	r.mu.Lock()
	for i, s := range publishSpans {
		ws[i] = r.localLocked(s) // both of one layout
	}
	r.mu.Unlock()
	lay := ws[1].lay
	type rec struct {
		name   string
		counts [2]*wireCounts
		hour   uint64
	}
	// One pass over each window's slots merged, record by record.
	var recs []rec
	at := map[uint32]int{} // record → its entry in recs
	for i, w := range ws {
		if len(w.slots) == 0 {
			continue
		}
		for c := merge(w.slots...).cursor(); c.ok; c.next(false) {
			lr := lay.recs[c.rec]
			counts := newCounts(lr)
			counts.addBody(lr, c.body)
			k, ok := at[c.rec]
			if !ok {
				k = len(recs)
				at[c.rec] = k
				recs = append(recs, rec{name: lr.Name})
			}
			recs[k].counts[i] = toWire(&counts)
			if i == 1 {
				recs[k].hour = counts.Answers
			}
		}
	}
	// The busiest first: what a bound leaves out is the quietest.
	slices.SortStableFunc(recs, func(a, b rec) int {
		switch {
		case a.hour > b.hour:
			return -1
		case a.hour < b.hour:
			return 1
		}
		return 0
	})
	n := len(recs)
	for range 20 {
		p := Published{Node: node, At: ws[1].At, Dropped: len(recs) - n}
		for i, w := range ws {
			ps := PublishedSpan{Span: w.Span, Covered: w.Covered, Records: make(map[string]*wireCounts, n)}
			for _, e := range recs[:n] {
				if e.counts[i] != nil {
					ps.Records[e.name] = e.counts[i]
				}
			}
			p.Windows = append(p.Windows, ps)
		}
		data, err = encode(&p)
		if err != nil || len(data) <= limit || n == 0 {
			return data, p.Dropped, err
		}
		// Scale down by the excess, with a tenth to spare.
		n = int(float64(n) * float64(limit) / float64(len(data)) * 0.9)
	}
	return nil, len(recs), fmt.Errorf("traffic: the windows do not fit in %d bytes", limit)
}

func encode(p *Published) ([]byte, error) {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	if err := json.NewEncoder(z).Encode(p); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DecodePublished reads what Publish encoded.
func DecodePublished(data []byte) (*Published, error) {
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var p Published
	if err := json.NewDecoder(io.LimitReader(z, 64<<20)).Decode(&p); err != nil {
		return nil, err
	}
	return &p, nil
}

// fleetView is the other nodes' windows, summed into this node's.
type fleetView struct {
	// spans[0] is the 5m windows, spans[1] the 1h ones: one map per node.
	spans [2][]map[string]*wireCounts
	// nodes are the nodes summed, sorted.
	nodes []string
}

func (f *fleetView) spanIndex(span time.Duration) int {
	if span <= fineSpan {
		return 0
	}
	return 1
}

// fleetCache keeps each node's decoded publication while its bytes stay.
type fleetCache struct {
	mu    sync.Mutex
	nodes map[string]fleetEntry
}

type fleetEntry struct {
	raw []byte
	p   *Published
}

// SetFleet sets what the other nodes published, by node name (self's own
// entry is skipped): Window sums them from now on. An entry that does not
// decode is left out and named in the error. nil ends the summing.
func (r *Recorder) SetFleet(self string, published map[string][]byte) error {
	r.fc.mu.Lock()
	defer r.fc.mu.Unlock()
	if published == nil {
		r.fleet.Store(nil)
		r.fc.nodes = nil
		return nil
	}
	if r.fc.nodes == nil {
		r.fc.nodes = map[string]fleetEntry{}
	}
	var errs []error
	for node := range r.fc.nodes {
		if _, ok := published[node]; !ok {
			delete(r.fc.nodes, node)
		}
	}
	f := &fleetView{}
	for node, raw := range published {
		if node == self {
			continue
		}
		e, ok := r.fc.nodes[node]
		if !ok || !bytes.Equal(e.raw, raw) {
			p, err := DecodePublished(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
				delete(r.fc.nodes, node)
				continue
			}
			e = fleetEntry{raw: slices.Clone(raw), p: p}
			r.fc.nodes[node] = e
		}
		f.nodes = append(f.nodes, node)
	}
	slices.Sort(f.nodes)
	for _, node := range f.nodes {
		p := r.fc.nodes[node].p
		for i, s := range publishSpans {
			var recs map[string]*wireCounts
			for _, w := range p.Windows {
				if w.Span == s {
					recs = w.Records
				}
			}
			if recs == nil {
				recs = map[string]*wireCounts{}
			}
			f.spans[i] = append(f.spans[i], recs)
		}
	}
	r.fleet.Store(f)
	if len(errs) > 0 {
		return fmt.Errorf("traffic: %v", errs)
	}
	return nil
}
