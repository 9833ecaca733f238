package main

// summary reads what bench/dnssec.sh wrote in a results directory and
// prints three markdown tables:
//
//	load     passes.tsv (round, server, file, raw dnsperf output, server CPU
//	         ticks, HZ) and servers.tsv (server, check, peak RSS KiB, note):
//	         per file and server the median QPS and CPU µs per query over
//	         the rounds, with the range, and the ratios to steer (unsigned)
//	         and to gdnsd taken round by round (the passes of one round run
//	         back to back, so a ratio compares like with like on a shared
//	         machine): their median and range.
//	flood    flood.jsonl: per server the flood's rate, TC share, signed
//	         answers, the server's CPU during the flood and the signatures
//	         it made (when the server reports them), and the validating
//	         resolver's share of validated answers.
//	start    start.tsv (round, variant, seconds to the first right answer
//	         of the last name): median and range per variant, and
//	         signed/unsigned per round.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/steer-dns/steer/bench/internal/dnsperf"
)

func summaryCmd(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ExitOnError)
	dir := fs.String("dir", "", "results directory")
	fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	f, err := os.Create(filepath.Join(*dir, "summary.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	return summary(*dir, io.MultiWriter(os.Stdout, f))
}

func summary(dir string, w io.Writer) error {
	if err := loadTable(dir, w); err != nil {
		return err
	}
	if err := floodTable(dir, w); err != nil {
		return err
	}
	return startTable(dir, w)
}

// num is s as a number, NaN when it is not one.
var num = dnsperf.Num

func readRows(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows, nil
}

// stats is a median with its range, NaN values left out.
type stats struct{ med, lo, hi float64 }

func statsOf(xs []float64) stats {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return stats{math.NaN(), math.NaN(), math.NaN()}
	}
	sort.Float64s(v)
	n := len(v)
	m := v[n/2]
	if n%2 == 0 {
		m = (v[n/2-1] + v[n/2]) / 2
	}
	return stats{m, v[0], v[n-1]}
}

func (s stats) format(prec int) string {
	if math.IsNaN(s.med) {
		return "–"
	}
	if s.lo == s.hi {
		return strconv.FormatFloat(s.med, 'f', prec, 64)
	}
	return fmt.Sprintf("%s (%s–%s)", strconv.FormatFloat(s.med, 'f', prec, 64),
		strconv.FormatFloat(s.lo, 'f', prec, 64), strconv.FormatFloat(s.hi, 'f', prec, 64))
}

type pass struct{ qps, cpu float64 } // cpu: µs per completed query

func loadTable(dir string, w io.Writer) error {
	rows, err := readRows(filepath.Join(dir, "passes.tsv"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	type rk struct {
		round        int
		server, file string
	}
	passes := map[rk]pass{}
	var servers, files []string
	rounds := map[int]bool{}
	for _, r := range rows {
		if len(r) < 6 {
			return fmt.Errorf("passes.tsv: short row %q", strings.Join(r, "\t"))
		}
		round, _ := strconv.Atoi(r[0])
		p, err := dnsperf.ParseFile(filepath.Join(dir, r[3]))
		if err != nil {
			return err
		}
		ticks, hz := num(r[4]), num(r[5])
		ps := pass{math.NaN(), math.NaN()}
		if p.OK {
			ps.qps = p.QPS
			if p.Completed > 0 && hz > 0 {
				ps.cpu = ticks / hz * 1e6 / p.Completed
			}
		}
		passes[rk{round, r[1], r[2]}] = ps
		rounds[round] = true
		if !slices.Contains(servers, r[1]) {
			servers = append(servers, r[1])
		}
		if !slices.Contains(files, r[2]) {
			files = append(files, r[2])
		}
	}
	info := map[string][]string{}
	if srows, err := readRows(filepath.Join(dir, "servers.tsv")); err == nil {
		for _, r := range srows {
			if len(r) >= 2 {
				info[r[0]] = r
			}
		}
	}
	ratio := func(s, base, file string, cpu bool) stats {
		var xs []float64
		for round := range rounds {
			a, okA := passes[rk{round, s, file}]
			b, okB := passes[rk{round, base, file}]
			if !okA || !okB {
				continue
			}
			if cpu {
				xs = append(xs, a.cpu/b.cpu)
			} else {
				xs = append(xs, a.qps/b.qps)
			}
		}
		return statsOf(xs)
	}
	fmt.Fprintf(w, "#### Load (%d round(s); pinned: server on one core, dnsperf on the other)\n\n", len(rounds))
	fmt.Fprintln(w, "| query file | server | answers | QPS | CPU µs/q | QPS ×steer | CPU ×steer | QPS ×gdnsd | CPU ×gdnsd | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, file := range files {
		for _, s := range servers {
			var q, c []float64
			for round := range rounds {
				if p, ok := passes[rk{round, s, file}]; ok {
					q = append(q, p.qps)
					c = append(c, p.cpu)
				}
			}
			if len(q) == 0 {
				continue
			}
			check, rss := "–", "–"
			if r := info[s]; len(r) >= 3 {
				check = r[1]
				if kb := num(r[2]); kb > 0 {
					rss = fmt.Sprintf("%.1f", kb/1024)
				}
			}
			if check != "–" && !strings.HasPrefix(check, "ok") {
				check = "✗ " + check
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", file, s, check,
				statsOf(q).format(0), statsOf(c).format(2),
				ratio(s, "steer", file, false).format(2), ratio(s, "steer", file, true).format(2),
				ratio(s, "gdnsd", file, false).format(2), ratio(s, "gdnsd", file, true).format(2), rss)
		}
	}
	fmt.Fprintln(w)
	for _, s := range servers {
		if r := info[s]; len(r) >= 4 && r[3] != "" {
			fmt.Fprintf(w, "- %s: %s\n", s, r[3])
		}
	}
	fmt.Fprintln(w, "\nMedians over the rounds, the range in brackets. A ratio is taken within each round (the two passes ran one after the other) and then its median and range are given. For CPU, lower is better.")
	fmt.Fprintln(w)
	return nil
}

// serverLine is the script's line in flood.jsonl: the server's CPU time
// over the flood, the signatures it made on queries' behalf and those its
// budget refused (-1: not reported), and its budget.
type serverLine struct {
	CPUs       float64 `json:"cpu_s"`
	WallS      float64 `json:"wall_s"`
	Budget     float64 `json:"budget_per_s"`
	Signatures float64 `json:"signatures"`
	Refused    float64 `json:"refused"`
	Note       string  `json:"note"`
}

func floodTable(dir string, w io.Writer) error {
	f, err := os.Open(filepath.Join(dir, "flood.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	type row struct {
		fl *floodResult
		rs *resolveResult
		sv *serverLine
	}
	rows := map[string]*row{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l struct{ Class, Label string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("flood.jsonl: %v", err)
		}
		r := rows[l.Label]
		if r == nil {
			r = &row{}
			rows[l.Label] = r
			order = append(order, l.Label)
		}
		var err error
		switch l.Class {
		case "flood":
			r.fl = new(floodResult)
			err = json.Unmarshal(sc.Bytes(), r.fl)
		case "resolver":
			r.rs = new(resolveResult)
			err = json.Unmarshal(sc.Bytes(), r.rs)
		case "server":
			r.sv = new(serverLine)
			err = json.Unmarshal(sc.Bytes(), r.sv)
		}
		if err != nil {
			return fmt.Errorf("flood.jsonl: %v", err)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintln(w, "#### Random-subdomain flood with DO from one spoofed source, and a validating resolver over TCP")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | flood sent q/s | answered % | TC % | signed answers/s | server CPU % | CPU µs per answer | online signatures/s (budget) | resolver queries | validated % | resolver p50 / p99 ms | first problem |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	pct := func(a, b int64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", 100*float64(a)/float64(b))
	}
	for _, label := range order {
		r := rows[label]
		cells := []string{label, "–", "–", "–", "–", "–", "–", "–", "–", "–", "–", ""}
		if fl := r.fl; fl != nil {
			cells[1] = fmt.Sprintf("%.0f", fl.SendQPS)
			cells[2] = pct(fl.Answered, fl.Sent)
			cells[3] = pct(fl.TC, fl.Answered)
			if fl.Seconds > 0 {
				cells[4] = fmt.Sprintf("%.0f", float64(fl.Signed)/fl.Seconds)
			}
		}
		if sv := r.sv; sv != nil && sv.WallS > 0 {
			cells[5] = fmt.Sprintf("%.0f", 100*sv.CPUs/sv.WallS)
			if r.fl != nil && r.fl.Answered > 0 {
				cells[6] = fmt.Sprintf("%.1f", sv.CPUs*1e6/float64(r.fl.Answered))
			}
			// signatures are made while the flood runs: per second of it
			secs := sv.WallS
			if r.fl != nil && r.fl.Seconds > 0 {
				secs = r.fl.Seconds
			}
			if sv.Signatures >= 0 {
				cells[7] = fmt.Sprintf("%.0f", sv.Signatures/secs)
			} else {
				cells[7] = "not reported"
			}
			if sv.Budget > 0 {
				cells[7] += fmt.Sprintf(" (%.0f)", sv.Budget)
			}
			if sv.Refused > 0 {
				cells[7] += fmt.Sprintf("; refused %.0f/s", sv.Refused/secs)
			}
		}
		if rs := r.rs; rs != nil {
			cells[8] = strconv.FormatInt(rs.Asked, 10)
			cells[9] = pct(rs.Validated, rs.Asked)
			cells[10] = fmt.Sprintf("%.1f / %.1f", rs.P50ms, rs.P99ms)
			cells[11] = rs.FirstProblem
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, label := range order {
		if sv := rows[label].sv; sv != nil && sv.Note != "" {
			fmt.Fprintf(w, "- %s: %s\n", label, sv.Note)
		}
	}
	fmt.Fprintln(w)
	return nil
}

func startTable(dir string, w io.Writer) error {
	rows, err := readRows(filepath.Join(dir, "start.tsv"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	type start struct{ secs, cpu float64 }
	byVariant := map[string]map[int]start{}
	var variants []string
	names := ""
	for _, r := range rows {
		if len(r) < 4 {
			return fmt.Errorf("start.tsv: short row %q", strings.Join(r, "\t"))
		}
		round, _ := strconv.Atoi(r[0])
		if byVariant[r[1]] == nil {
			byVariant[r[1]] = map[int]start{}
			variants = append(variants, r[1])
		}
		st := start{num(r[2]), math.NaN()}
		if len(r) >= 5 {
			st.cpu = num(r[4])
		}
		byVariant[r[1]][round] = st
		names = r[3]
	}
	fmt.Fprintf(w, "#### Start: %s steered names, exec to the first right answer of the last name\n\n", names)
	fmt.Fprintln(w, "| variant | seconds | ×unsigned (per round) | CPU seconds by then | ×unsigned (per round) |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
	base := byVariant["unsigned"]
	for _, v := range variants {
		var xs, rs, cs, crs []float64
		for round, t := range byVariant[v] {
			xs = append(xs, t.secs)
			cs = append(cs, t.cpu)
			if b, ok := base[round]; ok && b.secs > 0 {
				rs = append(rs, t.secs/b.secs)
				crs = append(crs, t.cpu/b.cpu)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", v, statsOf(xs).format(2), statsOf(rs).format(2),
			statsOf(cs).format(2), statsOf(crs).format(2))
	}
	fmt.Fprintln(w)
	return nil
}
