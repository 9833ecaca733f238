package metrics

import (
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the steering counters: answers by pool and decisions by
// rule. By default they are summed per zone, policy and pool (or rule),
// so their series do not grow with the number of steered names; the
// records the operator lists in metrics.per_record also get series of
// their own. Counting is one or two atomic adds at a precomputed index.

// Record describes one steered record to SetRecords.
type Record struct {
	// Name is the owner name, Zone the origin of its zone.
	Name, Zone string
	// Policy is the named policy whose rules it uses; "" for its own.
	Policy string
	// Pools are its pool names, in the order of the bits Answered is given.
	Pools []string
	// Rules is how many steering rules it has.
	Rules int
	// PerRecord gives it series of its own (metrics.per_record).
	PerRecord bool
}

// steerTable is the preallocated counter table for steered answers and
// decisions, replaced whole by SetRecords.
type steerTable struct {
	// Of record r, the pools are at poolOff[r]..poolOff[r+1] of poolSlot
	// and recPool, the rules at ruleOff[r]..ruleOff[r+1] of ruleSlot and
	// recRule; len(records)+1 entries each.
	poolOff, ruleOff []int32
	// poolSlot and ruleSlot are the series of each (record, pool) and
	// (record, rule) in answers and decisions.
	poolSlot, ruleSlot []int32
	// recPool and recRule are its series in recAnswers and recDecisions,
	// or -1 when the record has none; nil when no record has any.
	recPool, recRule []int32

	answers      []atomic.Uint64 // [series][fail_open], by zone, policy, pool
	answerLabels [][3]string
	decisions    []atomic.Uint64 // by zone, policy, rule
	decLabels    [][3]string

	recAnswers   []atomic.Uint64 // [series][fail_open], by record, pool
	recAnsLabels [][2]string
	recDecisions []atomic.Uint64 // by record, rule
	recDecLabels [][2]string
}

var (
	descPolicyAnswers = prometheus.NewDesc("steer_policy_answers_total",
		"Answers of steered records, summed by zone, policy (\"\" for records with rules of their own), pool, and whether they failed open (all targets down).",
		[]string{"zone", "policy", "pool", "fail_open"}, nil)
	descPolicyDecisions = prometheus.NewDesc("steer_policy_decisions_total",
		"Steering decisions, summed by zone, policy (\"\" for records with rules of their own) and the (1-based) rule that made them.",
		[]string{"zone", "policy", "rule"}, nil)
	descSteered = prometheus.NewDesc("steer_steered_answers_total",
		"Answers of the steered records listed in metrics.per_record, by record, pool, and whether they failed open (all targets down).",
		[]string{"record", "pool", "fail_open"}, nil)
	descDecisions = prometheus.NewDesc("steer_steering_decisions_total",
		"Steering decisions of the records listed in metrics.per_record, by record and the (1-based) rule that made them.",
		[]string{"record", "rule"}, nil)
	steerDescs = []*prometheus.Desc{descPolicyAnswers, descPolicyDecisions, descSteered, descDecisions}
)

// slots hands out one series index per distinct label set.
type slots[K comparable] struct {
	idx    map[K]int32
	labels []K
}

func (s *slots[K]) of(k K) int32 {
	if i, ok := s.idx[k]; ok {
		return i
	}
	if s.idx == nil {
		s.idx = map[K]int32{}
	}
	i := int32(len(s.labels))
	s.idx[k] = i
	s.labels = append(s.labels, k)
	return i
}

// SetRecords replaces the steering counters with a table for recs:
// record, pool and rule indexes in Answered refer to recs,
// each record's Pools and its Rules. Counts are not carried over. It is
// called at load and reload, may allocate, and is safe while Answered
// runs concurrently.
func (m *Metrics) SetRecords(recs []Record) {
	t := &steerTable{poolOff: make([]int32, len(recs)+1), ruleOff: make([]int32, len(recs)+1)}
	var ans, dec slots[[3]string]
	var rans, rdec slots[[2]string]
	per := false
	for _, r := range recs {
		per = per || r.PerRecord
	}
	rules := make([]string, 0, 8)
	for i, r := range recs {
		t.poolOff[i] = int32(len(t.poolSlot))
		t.ruleOff[i] = int32(len(t.ruleSlot))
		for _, p := range r.Pools {
			t.poolSlot = append(t.poolSlot, ans.of([3]string{r.Zone, r.Policy, p}))
			if per {
				s := int32(-1)
				if r.PerRecord {
					s = rans.of([2]string{r.Name, p})
				}
				t.recPool = append(t.recPool, s)
			}
		}
		for k := range max(r.Rules, 0) {
			for len(rules) <= k {
				rules = append(rules, strconv.Itoa(len(rules)+1))
			}
			t.ruleSlot = append(t.ruleSlot, dec.of([3]string{r.Zone, r.Policy, rules[k]}))
			if per {
				s := int32(-1)
				if r.PerRecord {
					s = rdec.of([2]string{r.Name, rules[k]})
				}
				t.recRule = append(t.recRule, s)
			}
		}
	}
	t.poolOff[len(recs)] = int32(len(t.poolSlot))
	t.ruleOff[len(recs)] = int32(len(t.ruleSlot))
	t.answerLabels, t.decLabels = ans.labels, dec.labels
	t.recAnsLabels, t.recDecLabels = rans.labels, rdec.labels
	t.answers = make([]atomic.Uint64, 2*len(ans.labels))
	t.decisions = make([]atomic.Uint64, len(dec.labels))
	t.recAnswers = make([]atomic.Uint64, 2*len(rans.labels))
	t.recDecisions = make([]atomic.Uint64, len(rdec.labels))

	m.steer.Store(t)
}

// Answered counts one answer of steered record number record: in the
// series of each pool with a bit set in pools (bits past the record's
// pools are ignored), failed open (every target down) or not, and as a
// decision by its rule number rule (0-based here, exposed 1-based as the
// rule label; none when rule < 0). Records and rules out of range of the
// last SetRecords are ignored. One read of the counter table; it does
// not allocate or lock.
func (m *Metrics) Answered(record int, pools uint64, rule int, allDown bool) {
	t := m.steer.Load()
	if uint(record) >= uint(len(t.poolOff)-1) {
		return
	}
	fo := 0
	if allDown {
		fo = 1
	}
	lo, hi := int(t.poolOff[record]), int(t.poolOff[record+1])
	for m := pools; m != 0; m &= m - 1 {
		i := lo + bits.TrailingZeros64(m)
		if i >= hi {
			break
		}
		t.answers[2*int(t.poolSlot[i])+fo].Add(1)
		if t.recPool != nil {
			if s := t.recPool[i]; s >= 0 {
				t.recAnswers[2*int(s)+fo].Add(1)
			}
		}
	}
	i := int(t.ruleOff[record]) + rule
	if rule < 0 || i >= int(t.ruleOff[record+1]) {
		return
	}
	t.decisions[t.ruleSlot[i]].Add(1)
	if t.recRule != nil {
		if s := t.recRule[i]; s >= 0 {
			t.recDecisions[s].Add(1)
		}
	}
}

var failOpen = [2]string{"false", "true"}

func (t *steerTable) collect(ch chan<- prometheus.Metric) {
	for i, l := range t.answerLabels {
		for fo := range 2 {
			ch <- prometheus.MustNewConstMetric(descPolicyAnswers, prometheus.CounterValue,
				float64(t.answers[2*i+fo].Load()), l[0], l[1], l[2], failOpen[fo])
		}
	}
	for i, l := range t.decLabels {
		ch <- prometheus.MustNewConstMetric(descPolicyDecisions, prometheus.CounterValue,
			float64(t.decisions[i].Load()), l[0], l[1], l[2])
	}
	for i, l := range t.recAnsLabels {
		for fo := range 2 {
			ch <- prometheus.MustNewConstMetric(descSteered, prometheus.CounterValue,
				float64(t.recAnswers[2*i+fo].Load()), l[0], l[1], failOpen[fo])
		}
	}
	for i, l := range t.recDecLabels {
		ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue,
			float64(t.recDecisions[i].Load()), l[0], l[1])
	}
}
