package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Defaults30 are the criteria for the 30-minute run: 90 % of the
// bins inside the band, misses within ±10 %, the drain's last query
// inside the predicted band (±1 s, see Criteria.LastTol).
func Defaults30() Criteria {
	return Criteria{InBand: 0.90, MissTol: 0.10, LastTol: time.Second}
}

// Wrongs are the deliberately wrong descriptions of the resolvers the
// harness must reject.
var Wrongs = []struct {
	Name  string
	Model Model
}{
	{"TTL 60 s instead of 10 s", Model{TTL: 60 * time.Second}},
	{"no big cache (its users spread over 400 resolvers)", Model{BigCount: 400}},
	{"canary weight 10 instead of 5", Model{CanaryWeight: 10}},
}

// Result is a validation: the honest prediction's verdict and the wrong
// ones'.
type Result struct {
	Real   *Real
	Honest *Verdict
	Wrong  []*Verdict
	// Took is the prediction's wall time.
	Took time.Duration
}

// Validate runs the real resolvers and compares the predictions.
func Validate(o Options, c Criteria, wrong bool) (*Result, error) {
	real, err := runReal(o)
	if err != nil {
		return nil, err
	}
	res := &Result{Real: real}
	started := time.Now()
	pred, _, err := predict(o.Dir, "scenario", real.Config, o, real.Subnets, Model{})
	if err != nil {
		return nil, fmt.Errorf("prediction: %w", err)
	}
	res.Took = time.Since(started)
	res.Honest = compare("prediction (scenario "+filepath.Join(o.Dir, "scenario.yaml")+")", o, real, pred, c)
	if wrong {
		for i, w := range Wrongs {
			pred, _, err := predict(o.Dir, fmt.Sprintf("wrong%d", i+1), real.Config, o, real.Subnets, w.Model)
			if err != nil {
				return nil, fmt.Errorf("wrong prediction %q: %w", w.Name, err)
			}
			res.Wrong = append(res.Wrong, compare("wrong: "+w.Name, o, real, pred, c))
		}
	}
	return res, nil
}

// Text is the report.
func (r *Result) Text(bins bool) string {
	var b strings.Builder
	o := r.Real.Obs
	fmt.Fprintf(&b, "user queries: big %d, ECS %d, small %d (lost %d, %d, %d); prediction took %s\n",
		o.Sent[siteBig], o.Sent[siteECS], o.Sent[siteSmall], o.Lost[siteBig], o.Lost[siteECS], o.Lost[siteSmall], r.Took.Round(time.Millisecond))
	fmt.Fprintf(&b, "big Unbound: %d misses, one every %.2f s (its entry's life plus the wait for the next query)\n",
		r.Real.Misses.Count[siteBig], r.Real.Misses.Gap.Seconds())
	b.WriteString(r.Honest.Text(bins))
	for _, w := range r.Wrong {
		b.WriteString(w.Text(false))
	}
	return b.String()
}
