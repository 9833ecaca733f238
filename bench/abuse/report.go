package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// printReport reads the JSON lines of the named files (stdin when none):
// the generator's flood, legit, cookie and generator lines and the
// script's server lines ({"class":"server","server":..,"cpu_s":..,
// "note":..}), and prints two markdown tables with one row per server, in
// the order the servers first appear.
func printReport(files []string, w io.Writer) error {
	rows := map[string]map[string]map[string]any{} // server -> class -> line
	var order []string
	read := func(r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return err
			}
			s, _ := m["server"].(string)
			cl, _ := m["class"].(string)
			if rows[s] == nil {
				rows[s] = map[string]map[string]any{}
				order = append(order, s)
			}
			rows[s][cl] = m
		}
		return sc.Err()
	}
	if len(files) == 0 {
		if err := read(os.Stdin); err != nil {
			return err
		}
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		err = read(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
	}

	fmt.Fprintln(w, "Flood (spoofed victim /24, no cookie) and server cost:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | flood sent q/s (target) | responses/s to victims | MB in → MB out | amplification bytes (wire) | TC % | no response % | server CPU s (% of a core) | dropped at server socket | other CPU s ¹ | load avg before → after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range order {
		f, sv := rows[s]["flood"], rows[s]["server"]
		if f == nil {
			continue
		}
		cpu, drops, load, other := "–", "–", "–", "–"
		if sv != nil {
			if g := rows[s]["generator"]; g != nil && num(sv, "machine_busy_s") > 0 {
				// clock-tick resolution can make it slightly negative on an idle machine
				other = fmt.Sprintf("%.1f", max(0, num(sv, "machine_busy_s")-num(sv, "cpu_s")-num(g, "cpu_s")))
			}
			cpu = fmt.Sprintf("%.2f (%.0f %%)", num(sv, "cpu_s"), 100*num(sv, "cpu_s")/num(f, "duration_s"))
			drops = fmt.Sprintf("%.0f", num(sv, "rx_drops"))
			load = fmt.Sprintf("%.2f → %.2f", num(sv, "load_before"), num(sv, "load_after"))
		}
		fmt.Fprintf(w, "| %s | %.0f (%.0f) | %.0f | %.1f → %.1f | %.2f (%.2f) | %.1f | %.1f | %s | %s | %s | %s |\n", s,
			num(f, "send_qps"), num(f, "target_qps"), num(f, "resp_per_s"),
			num(f, "bytes_sent")/1e6, num(f, "bytes_received")/1e6,
			num(f, "amplification"), num(f, "amplification_wire"),
			num(f, "tc_pct"), num(f, "no_response_pct"), cpu, drops, other, load)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Legitimate ECS resolver (127.8.8.8) and cookie clients (127.6.6.0/24) during the flood:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | resolver answered w/o TC % | TC % | unanswered % | other % | p50 / p99 ms | ECS scopes returned | cookie clients answered w/o TC % | TC % | unanswered % | BADCOOKIE retries | generator CPU s | dropped at generator sockets |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range order {
		l, c, g := rows[s]["legit"], rows[s]["cookie"], rows[s]["generator"]
		cells := []string{s}
		if l != nil {
			cells = append(cells, f1(num(l, "answered_pct")), f1(num(l, "tc_pct")), f1(num(l, "unanswered_pct")), f1(num(l, "other_pct")),
				fmt.Sprintf("%.2f / %.2f", num(l, "p50_ms"), num(l, "p99_ms")), scopes(l))
		} else {
			cells = append(cells, "–", "–", "–", "–", "–", "–")
		}
		if c != nil {
			cells = append(cells, f1(num(c, "answered_pct")), f1(num(c, "tc_pct")), f1(num(c, "unanswered_pct")), fmt.Sprintf("%.0f", num(c, "badcookie_retries")))
		} else {
			cells = append(cells, "–", "–", "–", "–")
		}
		if g != nil {
			cells = append(cells, fmt.Sprintf("%.1f", num(g, "cpu_s")), fmt.Sprintf("%.0f", num(g, "rx_drops")))
		} else {
			cells = append(cells, "–", "–")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "¹ CPU time of the whole machine during the run minus the server's and the generator's: other processes, and softirq work the kernel did outside both.")
	var notes []string
	for _, s := range order {
		if sv := rows[s]["server"]; sv != nil {
			if n, _ := sv["note"].(string); n != "" {
				notes = append(notes, fmt.Sprintf("- %s: %s", s, n))
			}
		}
		if f := rows[s]["flood"]; f != nil && num(f, "tc_pct") == 0 && num(f, "no_response_pct") < 1 {
			notes = append(notes, fmt.Sprintf("- %s: no flood answer was slipped or dropped: no rate limit acted", s))
		}
		if c := rows[s]["cookie"]; c != nil && num(c, "responses_with_server_cookie_pct") == 0 {
			notes = append(notes, fmt.Sprintf("- %s: no answer carried a server cookie: cookies were not answered", s))
		}
		if g := rows[s]["generator"]; g != nil && num(g, "flood_achieved_pct") < 98 && num(g, "flood_target_qps") > 0 {
			notes = append(notes, fmt.Sprintf("- %s: the generator sent only %.1f %% of the flood's target rate", s, num(g, "flood_achieved_pct")))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

func f1(f float64) string { return fmt.Sprintf("%.1f", f) }

// scopes formats the legit line's scope counts, most frequent first.
func scopes(l map[string]any) string {
	m, _ := l["scopes"].(map[string]any)
	if len(m) == 0 {
		return "–"
	}
	type kv struct {
		k string
		v float64
	}
	var s []kv
	var total float64
	for k, v := range m {
		f, _ := v.(float64)
		s = append(s, kv{k, f})
		total += f
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for i, e := range s {
		if i == 4 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", e.k, 100*e.v/total))
	}
	return strings.Join(parts, ", ")
}
