package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FromLogYAML writes a scenario inferred by FromLog as a scenario file:
// the population with comments saying where each number came from and
// what the log could not tell, ready for events to be added. (Written by
// hand rather than marshalled: durations read as "48h", not nanoseconds,
// and the comments are the point.)
func FromLogYAML(sc *Scenario, rep *LogReport) []byte {
	var b strings.Builder
	if rep != nil {
		fmt.Fprintf(&b, "# Inferred from steer's query log: %d entries of %s %s over %s\n", rep.RecordEntries, rep.Record, rep.Type, rep.Span.Round(time.Second))
		fmt.Fprintf(&b, "# (%s to %s), TTL %s (%s), sample %g.\n", rep.Start.UTC().Format(time.RFC3339), rep.End.UTC().Format(time.RFC3339), rep.TTL, rep.TTLFrom, rep.Sample)
		fmt.Fprintf(&b, "# %d misses, %.4g/s, from %d resolvers; users %.4g q/s", rep.Misses, rep.MissRate, len(rep.Resolvers), rep.UserRate)
		if rep.Saturated > 0 {
			fmt.Fprintf(&b, " at least (%d keys saturated)", rep.Saturated)
		}
		b.WriteString(".\n")
		if len(rep.Unknown) > 0 {
			b.WriteString("# Not in the log, assumed:\n")
			for _, u := range rep.Unknown {
				fmt.Fprintf(&b, "#   - %s\n", u)
			}
		}
		b.WriteString("# Add events (set_weights, drain, fail, ...) to ask what a change would do.\n")
	}
	fmt.Fprintf(&b, "duration: %s\n", yamlDuration(time.Duration(sc.Duration)))
	if sc.Bin != 0 {
		fmt.Fprintf(&b, "bin: %s\n", yamlDuration(time.Duration(sc.Bin)))
	}
	fmt.Fprintf(&b, "record: %s\n", strconv.Quote(sc.Record))
	if sc.Type != "" {
		fmt.Fprintf(&b, "type: %s\n", sc.Type)
	}
	// Per site, what the log showed (for the comments).
	type siteInfo struct{ resolvers, keys, misses, saturated int }
	info := map[string]*siteInfo{}
	if rep != nil {
		for _, r := range rep.Resolvers {
			if info[r.Site] == nil {
				info[r.Site] = &siteInfo{}
			}
			info[r.Site].resolvers++
		}
		for _, k := range rep.Keys {
			si := info[k.Site]
			if si == nil {
				continue
			}
			si.keys++
			si.misses += k.Misses
			if k.Saturated {
				si.saturated++
			}
		}
	}
	b.WriteString("clients:\n")
	for _, g := range sc.Clients {
		fmt.Fprintf(&b, "  - name: %s\n", strconv.Quote(g.Name))
		fmt.Fprintf(&b, "    rate: %s    # user queries/s, inferred from the misses\n", strconv.FormatFloat(g.Rate, 'g', 6, 64))
		b.WriteString("    prefixes: [")
		for i, p := range g.Prefixes {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(p))
		}
		b.WriteString("]\n")
	}
	b.WriteString("resolvers:\n")
	for _, s := range sc.Resolvers {
		fmt.Fprintf(&b, "  - name: %s", strconv.Quote(s.Name))
		if si := info[s.Name]; si != nil {
			fmt.Fprintf(&b, "    # %d resolver(s), %d cache key(s), %d misses", si.resolvers, si.keys, si.misses)
			if si.saturated > 0 {
				fmt.Fprintf(&b, ", %d saturated", si.saturated)
			}
		}
		b.WriteString("\n")
		if s.Share != nil {
			fmt.Fprintf(&b, "    share: %s\n", strconv.FormatFloat(*s.Share, 'g', -1, 64))
		}
		if len(s.Groups) > 0 {
			b.WriteString("    groups: [")
			for i, g := range s.Groups {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Quote(g))
			}
			b.WriteString("]\n")
		}
		if s.Count > 1 {
			fmt.Fprintf(&b, "    count: %d\n", s.Count)
		}
		if s.Address != "" {
			fmt.Fprintf(&b, "    address: %s\n", strconv.Quote(s.Address))
		}
		if s.Caches > 1 {
			fmt.Fprintf(&b, "    caches: %d\n", s.Caches)
		}
		if s.ECS != nil && s.ECS.Enabled {
			var parts []string
			if s.ECS.V4 > 0 {
				parts = append(parts, fmt.Sprintf("v4: %d", s.ECS.V4))
			}
			if s.ECS.V6 > 0 {
				parts = append(parts, fmt.Sprintf("v6: %d", s.ECS.V6))
			}
			if s.ECS.HonorsScope != nil {
				parts = append(parts, fmt.Sprintf("honors_scope: %t", *s.ECS.HonorsScope))
			}
			if len(parts) == 0 {
				b.WriteString("    ecs: true\n")
			} else {
				fmt.Fprintf(&b, "    ecs: {%s}\n", strings.Join(parts, ", "))
			}
		}
	}
	return []byte(b.String())
}

// yamlDuration writes d as "48h", "1h30m" or "90s".
func yamlDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
