// Command report turns bench/run.sh's raw results into numbers.
//
//	report lat < dnsperf-v-output > file
//	    copies dnsperf's summary (every line but the per-query "> " lines)
//	    and appends one line:
//	    LATENCY n=N timeouts=T p50_us=.. p90_us=.. p99_us=.. max_us=..
//	    computed from the per-query latencies of `dnsperf -v`.
//
//	report summary -dir RESULTS
//	    reads RESULTS/passes.tsv and RESULTS/servers.tsv (written by run.sh)
//	    and the raw files they name, and prints a markdown table per mode:
//	    the median over rounds of each figure, with ratios to gdnsd. It also
//	    writes RESULTS/summary.md and RESULTS/summary.tsv.
package main

import (
	"bufio"
	"cmp"
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

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: report lat | report summary -dir DIR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "lat":
		if err := lat(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "report lat:", err)
			os.Exit(1)
		}
	case "summary":
		fs := flag.NewFlagSet("summary", flag.ExitOnError)
		dir := fs.String("dir", "", "results directory")
		fs.Parse(os.Args[2:])
		if *dir == "" {
			fs.Usage()
			os.Exit(2)
		}
		if err := summary(*dir, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "report summary:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
}

// lat reads `dnsperf -v` output: per-query lines are
// "> RCODE QNAME QTYPE SECONDS" (or "> NOERROR binary input SECONDS" for
// -B input); a timed-out query is "> T ...".
func lat(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	bw := bufio.NewWriter(out)
	defer bw.Flush()
	var us []float64
	timeouts := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "> ") {
			fmt.Fprintln(bw, line)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if f[1] == "T" {
			timeouts++
			continue
		}
		if f[1] == "I" {
			continue
		}
		s, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		us = append(us, s*1e6)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Float64s(us)
	fmt.Fprintf(bw, "LATENCY n=%d timeouts=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f\n",
		len(us), timeouts, pct(us, 50), pct(us, 90), pct(us, 99), pct(us, 100))
	return nil
}

// pct is the nearest-rank percentile of sorted xs (NaN when empty).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p/100*float64(len(xs)))) - 1
	k = max(0, min(k, len(xs)-1))
	return xs[k]
}

// num is s as a number, NaN when it is not one.
var num = dnsperf.Num

// joinF2 lists xs with two decimals.
func joinF2(xs []float64) string {
	ss := make([]string, len(xs))
	for i, x := range xs {
		ss[i] = f2(x)
	}
	return strings.Join(ss, ", ")
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

type key struct{ mode, file, server string }

type acc struct {
	qps, cpu, util, lostPct, p50, p99, latLost []float64
	// byRound holds each round's throughput pass (QPS, CPU µs a query),
	// for the ratios to gdnsd's pass of the same round.
	byRound map[string][2]float64
}

// pairedRatios are a's figures over g's in each round both ran, in round
// order: QPS ratios and CPU ratios. Passes of one round are seconds apart,
// so a ratio within a round cancels the machine's slower phases (on a
// shared VM one pass can take 1.4× the CPU of the same server's next).
func pairedRatios(a, g *acc) (qps, cpu []float64) {
	if a == nil || g == nil {
		return nil, nil
	}
	rounds := make([]string, 0, len(a.byRound))
	for r := range a.byRound {
		rounds = append(rounds, r)
	}
	slices.SortFunc(rounds, func(x, y string) int {
		if c := cmp.Compare(len(x), len(y)); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, r := range rounds {
		x, y := a.byRound[r], g.byRound[r]
		if y == [2]float64{} {
			continue
		}
		qps = append(qps, x[0]/y[0])
		cpu = append(cpu, x[1]/y[1])
	}
	return qps, cpu
}

type serverInfo struct {
	check string
	rssKB float64
	note  string
}

func readTSV(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	return rows, nil
}

func summary(dir string, out io.Writer) error {
	// passes.tsv: mode round server file kind raw cpu_ticks hz
	passes, err := readTSV(filepath.Join(dir, "passes.tsv"))
	if err != nil {
		return err
	}
	data := map[key]*acc{}
	var modes, files, servers []string
	add := func(list *[]string, s string) {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	rounds := map[string]bool{}
	for _, p := range passes {
		if len(p) < 8 {
			return fmt.Errorf("passes.tsv: short row %q", p)
		}
		mode, round, server, file, kind, raw := p[0], p[1], p[2], p[3], p[4], p[5]
		ticks, hz := num(p[6]), num(p[7])
		add(&modes, mode)
		add(&files, file)
		add(&servers, server)
		rounds[round] = true
		k := key{mode, file, server}
		if data[k] == nil {
			data[k] = &acc{}
		}
		a := data[k]
		d, err := dnsperf.ParseFile(filepath.Join(dir, raw))
		if err != nil {
			return err
		}
		switch kind {
		case "tput":
			if !d.OK {
				a.qps = append(a.qps, math.NaN())
				continue
			}
			a.qps = append(a.qps, d.QPS)
			cpu := math.NaN()
			if d.Completed > 0 && hz > 0 && !math.IsNaN(ticks) {
				cpu = ticks / hz * 1e6 / d.Completed
				a.cpu = append(a.cpu, cpu)
			}
			if a.byRound == nil {
				a.byRound = map[string][2]float64{}
			}
			a.byRound[round] = [2]float64{d.QPS, cpu}
			if d.Runtime > 0 && hz > 0 && !math.IsNaN(ticks) {
				a.util = append(a.util, 100*ticks/hz/d.Runtime)
			}
			if d.Sent > 0 {
				a.lostPct = append(a.lostPct, 100*d.Lost/d.Sent)
			}
		case "lat":
			a.p50 = append(a.p50, d.P50)
			a.p99 = append(a.p99, d.P99)
			if d.OK {
				a.latLost = append(a.latLost, d.Lost)
			}
		}
	}
	// servers.tsv: mode server check rss_kb note
	info := map[[2]string]serverInfo{}
	if rows, err := readTSV(filepath.Join(dir, "servers.tsv")); err == nil {
		for _, r := range rows {
			if len(r) < 4 {
				continue
			}
			si := serverInfo{check: r[2], rssKB: num(r[3])}
			if len(r) > 4 {
				si.note = r[4]
			}
			info[[2]string{r[0], r[1]}] = si
		}
	}
	order := []string{"steer", "steer-base", "steer-guard", "gdnsd", "knot", "nsd"}
	slices.SortStableFunc(servers, func(a, b string) int {
		ia, ib := slices.Index(order, a), slices.Index(order, b)
		if ia < 0 {
			ia = len(order)
		}
		if ib < 0 {
			ib = len(order)
		}
		return ia - ib
	})

	var md, tsv strings.Builder
	fmt.Fprintf(&tsv, "mode\tfile\tserver\tcheck\tqps\tcpu_us_per_q\tserver_cpu_pct\tp50_us\tp99_us\tlost_pct\tlat_lost\tpeak_rss_mib\tqps_vs_gdnsd\tcpu_vs_gdnsd\trounds\tqps_vs_gdnsd_by_round\tcpu_vs_gdnsd_by_round\n")
	var paired strings.Builder
	for _, mode := range modes {
		fmt.Fprintf(&md, "### %s\n\n", mode)
		fmt.Fprintf(&md, "| query file | server | answers | QPS | CPU µs/q | server CPU %% | p50 µs | p99 µs | lost %% (max load) | lost (fixed rate) | peak RSS MiB | QPS ×gdnsd | CPU ×gdnsd |\n")
		fmt.Fprintf(&md, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, file := range files {
			g := data[key{mode, file, "gdnsd"}]
			var gq, gc float64 = math.NaN(), math.NaN()
			if g != nil {
				gq, gc = median(g.qps), median(g.cpu)
			}
			for _, s := range servers {
				a := data[key{mode, file, s}]
				if a == nil {
					continue
				}
				si := info[[2]string{mode, s}]
				check := si.check
				if check == "" {
					check = "?"
				}
				mark := ""
				if !strings.HasPrefix(check, "ok") {
					mark = " ✗"
				}
				q, c := median(a.qps), median(a.cpu)
				fmt.Fprintf(&md, "| %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
					file, s, mark, check, f0(q), f2(c), f0(median(a.util)), f0(median(a.p50)), f0(median(a.p99)),
					f2(median(a.lostPct)), f0(median(a.latLost)), f1(si.rssKB/1024), ratio(q, gq), ratio(c, gc))
				pq, pc := pairedRatios(a, g)
				fmt.Fprintf(&tsv, "%s\t%s\t%s\t%s\t%.0f\t%.3f\t%.0f\t%.0f\t%.0f\t%.3f\t%.0f\t%.1f\t%.3f\t%.3f\t%d\t%.3f\t%.3f\n",
					mode, file, s, check, q, c, median(a.util), median(a.p50), median(a.p99), median(a.lostPct), median(a.latLost),
					si.rssKB/1024, q/gq, c/gc, len(a.qps), median(pq), median(pc))
				if s != "gdnsd" && len(pc) > 0 {
					fmt.Fprintf(&paired, "| %s | %s | %s | %s | %s | %s |\n", mode, file, s,
						f2(median(pc)), joinF2(pc), f2(median(pq)))
				}
			}
		}
		var notes []string
		for _, s := range servers {
			if si, ok := info[[2]string{mode, s}]; ok && si.note != "" {
				notes = append(notes, fmt.Sprintf("%s: %s", s, si.note))
			}
		}
		if len(notes) > 0 {
			fmt.Fprintf(&md, "\n%s\n", strings.Join(notes, "; "))
		}
		fmt.Fprintln(&md)
	}
	fmt.Fprintf(&md, "Medians over %d round(s). ✗ = the server gave wrong answers in the pre-load check; its figures do not count.\n", len(rounds))
	if paired.Len() > 0 {
		fmt.Fprintf(&md, "\nAgainst gdnsd's pass of the same round (passes of a round are seconds apart, so these ratios cancel the machine's slower phases that the medians above mix):\n\n")
		fmt.Fprintf(&md, "| mode | query file | server | CPU ×gdnsd, median of rounds | each round | QPS ×gdnsd, median of rounds |\n|---|---|---|--:|---|--:|\n%s", paired.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.tsv"), []byte(tsv.String()), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(out, md.String())
	return err
}

func f0(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

func f1(x float64) string {
	if math.IsNaN(x) || x == 0 {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

func f2(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}
