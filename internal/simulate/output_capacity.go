package simulate

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CapacityJSON is a capacity prediction in result.json and the admin
// API's POST /v1/simulate (key "capacity", absent without a load feed).
// Shares are fractions; times seconds from the simulated start.
type CapacityJSON struct {
	Record string `json:"record"`
	// Pools name the entries of every per-pool array; CapacityPools are
	// those that declare a capacity.
	Pools         []string `json:"pools"`
	CapacityPools []string `json:"capacity_pools"`
	IntervalS     float64  `json:"interval_s"`
	// Model is "fixed" or "proportional" (capacity.model).
	Model       string  `json:"model"`
	MaxShift    float64 `json:"max_shift"`
	LowWater    float64 `json:"low_water"`
	StaleAfterS float64 `json:"stale_after_s"`
	// Steps are the feed intervals in order.
	Steps []CapacityStepJSON `json:"steps"`
}

// CapacityStepJSON is one feed interval: the shares it saw, the
// networks shed during it, and the step at its end.
type CapacityStepJSON struct {
	AtS float64 `json:"at_s"`
	// Share is per pool the share of user queries, Answers the share of
	// steer's answers (its answer counters).
	Share   []float64 `json:"share"`
	Answers []float64 `json:"answers"`
	UserQPS float64   `json:"user_qps"`
	AuthQPS float64   `json:"auth_qps"`
	// Shed are the networks shed during the interval, most users first
	// (at most 20); ShedCount how many there were.
	Shed      []ShedNetworkJSON  `json:"shed"`
	ShedCount int                `json:"shed_count"`
	Pools     []CapacityPoolJSON `json:"pools"`
}

// ShedNetworkJSON is a network shed during an interval.
type ShedNetworkJSON struct {
	Prefix    string   `json:"prefix"`
	Dropped   []string `json:"dropped"`
	To        []string `json:"to"`
	Share     float64  `json:"share"`
	Countries []string `json:"countries"`
}

// CapacityPoolJSON is a capacity pool after the step at the end of an
// interval: the load fed (percent of its target) and what the step did.
type CapacityPoolJSON struct {
	Pool      string  `json:"pool"`
	Fed       bool    `json:"fed"`
	Load      float64 `json:"load"`
	Percent   float64 `json:"percent"`
	State     string  `json:"state"`
	Networks  int     `json:"networks"`
	Shed      int     `json:"shed"`
	ShedShare float64 `json:"shed_share"`
	Moved     int     `json:"moved"`
	Reason    string  `json:"reason"`
}

// JSON returns the prediction's JSON shape (nil for nil).
func (c *CapacityResult) JSON() *CapacityJSON {
	if c == nil {
		return nil
	}
	j := &CapacityJSON{Record: c.Record, Pools: nonNil(c.Pools), CapacityPools: nonNil(c.Capacity), IntervalS: c.Interval.Seconds(),
		Model: c.Model, MaxShift: c.Options.MaxShift, LowWater: c.Options.LowWater, StaleAfterS: c.Options.StaleAfter.Seconds(),
		Steps: make([]CapacityStepJSON, 0, len(c.Steps))}
	for _, s := range c.Steps {
		sj := CapacityStepJSON{AtS: s.At.Seconds(), Share: finiteAll(s.Share), Answers: finiteAll(s.Answers),
			UserQPS: finite(s.UserQPS), AuthQPS: finite(s.AuthQPS), Shed: make([]ShedNetworkJSON, 0, len(s.Shed)),
			ShedCount: s.ShedCount, Pools: make([]CapacityPoolJSON, 0, len(s.Pools))}
		for _, n := range s.Shed {
			sj.Shed = append(sj.Shed, ShedNetworkJSON{Prefix: n.Prefix.String(), Dropped: nonNil(n.Dropped), To: nonNil(n.To),
				Share: finite(n.Share), Countries: nonNil(n.Countries)})
		}
		for _, p := range s.Pools {
			sj.Pools = append(sj.Pools, CapacityPoolJSON{Pool: p.Pool, Fed: p.Fed, Load: finite(p.Load), Percent: finite(p.Percent),
				State: p.State, Networks: p.Networks, Shed: p.Shed, ShedShare: finite(p.ShedShare), Moved: p.Moved, Reason: p.Reason})
		}
		j.Steps = append(j.Steps, sj)
	}
	return j
}

// capacityRows are capacity.csv: per interval and pool, the shares and,
// for a capacity pool, the step at the interval's end.
func capacityRows(r *Result) [][]string {
	rows := [][]string{{"interval_start_s", "pool", "share_pct", "answers_pct", "load", "load_pct_of_target", "state", "networks", "shed", "moved", "reason"}}
	c := r.Capacity
	if c == nil {
		return rows
	}
	for _, s := range c.Steps {
		for i, p := range c.Pools {
			row := []string{fmtSecs(s.At), p, csvPct(elemAt(s.Share, i)), csvPct(elemAt(s.Answers, i)), "", "", "", "", "", "", ""}
			for _, cp := range s.Pools {
				if cp.Pool == p {
					row[4], row[5], row[6] = fmtNum(cp.Load, 4), csvPct(cp.Percent), cp.State
					row[7], row[8], row[9], row[10] = fmt.Sprint(cp.Networks), fmt.Sprint(cp.Shed), fmt.Sprint(cp.Moved), cp.Reason
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// maxSummaryCapacityRows bounds the intervals the summary lists.
const maxSummaryCapacityRows = 14

// summaryCapacity explains the capacity prediction: per interval the
// capacity pools' share of users and the step at its end (the intervals
// where something moved, the first and the last), then where the
// shedding sent which networks.
func summaryCapacity(b *strings.Builder, r *Result) {
	c := r.Capacity
	if c == nil || len(c.Steps) == 0 {
		return
	}
	model := "the given load every interval"
	if c.Model == "proportional" {
		model = "load following the user queries each pool answers"
	}
	fmt.Fprintf(b, "\ncapacity feedback (the runs above take the shed networks of these steps as phases): the node's step every %s for %s, %s (max_shift %g, low_water %g, stale_after %s)\n",
		fmtDurWords(c.Interval), fmtDurWords(time.Duration(len(c.Steps))*c.Interval), model, c.Options.MaxShift, c.Options.LowWater, Duration(c.Options.StaleAfter))
	idx := map[string]int{}
	for i, p := range c.Pools {
		idx[p] = i
	}
	show := make([]bool, len(c.Steps))
	show[0], show[len(c.Steps)-1] = true, true
	n := 2
	prevState := map[string]string{}
	for k, s := range c.Steps {
		changed := false
		for _, p := range s.Pools {
			if p.Moved != 0 || p.State != prevState[p.Pool] {
				changed = true
			}
			prevState[p.Pool] = p.State
		}
		if changed && !show[k] && n < maxSummaryCapacityRows {
			show[k] = true
			n++
		}
	}
	for k, s := range c.Steps {
		if !show[k] {
			if k > 0 && show[k-1] {
				b.WriteString("  …\n")
			}
			continue
		}
		var parts []string
		for _, p := range s.Pools {
			i, ok := idx[p.Pool]
			if !ok {
				continue
			}
			step := p.Reason
			switch {
			case p.Moved > 0:
				step = fmt.Sprintf("sheds %d more: %s", p.Moved, p.Reason)
			case p.Moved < 0:
				step = fmt.Sprintf("takes %d back: %s", -p.Moved, p.Reason)
			}
			parts = append(parts, fmt.Sprintf("%s %s %% of users (%s %% of answers); then %s", p.Pool, fmtPct(elemAt(s.Share, i)), fmtPct(elemAt(s.Answers, i)), step))
		}
		fmt.Fprintf(b, "  %-8s %s\n", fmtClockShort(s.At), strings.Join(parts, "; "))
	}
	// Where the shedding sent users: the first interval with networks
	// shed, and the last if it differs.
	var listed []int
	for k, s := range c.Steps {
		if s.ShedCount > 0 {
			listed = append(listed, k)
			break
		}
	}
	if last := len(c.Steps) - 1; len(listed) > 0 && listed[0] != last && c.Steps[last].ShedCount > 0 && !sameShed(c.Steps[listed[0]], c.Steps[last]) {
		listed = append(listed, last)
	}
	for _, k := range listed {
		s := c.Steps[k]
		var nets []string
		for i, sn := range s.Shed {
			if i == 5 {
				break
			}
			where := ""
			if len(sn.Countries) > 0 {
				cs := sn.Countries
				if len(cs) > 3 {
					cs = append(slices.Clone(cs[:3]), "…")
				}
				where = "; " + strings.Join(cs, " ")
			}
			nets = append(nets, fmt.Sprintf("%s → %s (%s %% of users%s)", sn.Prefix, orNone(sn.To), fmtPct(sn.Share), where))
		}
		more := ""
		if s.ShedCount > len(nets) {
			more = fmt.Sprintf(", %d more", s.ShedCount-len(nets))
		}
		fmt.Fprintf(b, "  shed at %s: %s%s\n", fmtClockShort(s.At), strings.Join(nets, ", "), more)
	}
}

func sameShed(a, b CapacityStep) bool {
	if a.ShedCount != b.ShedCount || len(a.Shed) != len(b.Shed) {
		return false
	}
	for i := range a.Shed {
		if a.Shed[i].Prefix != b.Shed[i].Prefix {
			return false
		}
	}
	return true
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no pool"
	}
	return strings.Join(s, "+")
}
