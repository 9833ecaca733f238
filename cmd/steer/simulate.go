package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/node"
	"github.com/steer-dns/steer/internal/simulate"
)

type simulateOpts struct {
	config, scenario, out, fromLog, record *string
	seed                                   *uint64
	runs                                   *int
	ttl                                    *time.Duration
	sample                                 *float64
	json                                   *bool
	// The load feed of a capacity prediction (simulate.CapacitySpec):
	// they set or override the scenario's capacity section.
	load                map[string]float64
	loadFile, loadModel *string
	loadInterval        *time.Duration
	loadIntervals       *int
}

func simulateFlags(fs *flag.FlagSet) simulateOpts {
	var o simulateOpts
	o.config = fs.String("config", "", "configuration the scenario runs against (default: "+DefaultConfig+" if it exists, else the embedded demo)")
	o.scenario = fs.String("scenario", "", "scenario file: clients, resolver sites and a timeline of events (YAML)")
	o.out = fs.String("out", "", "directory the CSV, JSON, PNG and SVG files are written to (created; required)")
	o.seed = fs.Uint64("seed", 0, "seed of the first run, run i is seeded seed+i (default: the scenario's, else 1)")
	o.runs = fs.Int("runs", 0, "number of Monte-Carlo runs (default: the scenario's, else 20)")
	o.fromLog = fs.String("from-log", "", "build the population from steer's query log (JSON lines); writes population.yaml to --out")
	o.ttl = fs.Duration("ttl", 0, "with --from-log: the record's TTL (default: from the log's answers or the configuration)")
	o.sample = fs.Float64("sample", 0, "with --from-log: the fraction of queries the log holds, query_log.sample (default: the configuration's query_log.sample, else 1)")
	o.record = fs.String("record", "", "with --from-log: the steered name to model (default: the scenario's, else the most asked)")
	o.json = fs.Bool("json", false, "print the result as JSON instead of the summary")
	o.load = map[string]float64{}
	fs.Func("load", "POOL=VALUE: a capacity pool's load in its feed's unit (repeatable); predicts capacity feedback (the scenario's capacity.load)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || strings.TrimSpace(k) == "" || err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return fmt.Errorf("want POOL=VALUE with a load ≥ 0, such as a=150")
		}
		o.load[strings.TrimSpace(k)] = f
		return nil
	})
	o.loadFile = fs.String("load-file", "", "a load file in the node's format (load.files, PUT /v1/load): the capacity pools' loads (capacity.load_file)")
	o.loadModel = fs.String("load-model", "", "fixed (the load given, every interval) or proportional (it follows the user queries the pool answers) (capacity.model; default fixed)")
	o.loadInterval = fs.Duration("load-interval", 0, "the load feed's interval: one step of the feedback loop each (capacity.interval; default 10s)")
	o.loadIntervals = fs.Int("load-intervals", 0, "how many feed intervals to predict (capacity.intervals; default: the duration's)")
	return o
}

// loadFlagsErr checks the --load companions before anything is loaded.
func loadFlagsErr(o simulateOpts, set map[string]bool) error {
	switch {
	case set["load-model"] && *o.loadModel != "fixed" && *o.loadModel != "proportional":
		return fmt.Errorf("--load-model %q: want fixed or proportional", *o.loadModel)
	case set["load-interval"] && *o.loadInterval <= 0:
		return fmt.Errorf("--load-interval %s: want a positive duration such as 10s", *o.loadInterval)
	case set["load-intervals"] && *o.loadIntervals < 1:
		return fmt.Errorf("--load-intervals %d: want 1 or more", *o.loadIntervals)
	}
	return nil
}

// withLoad applies the --load flags to the scenario's capacity section
// (creating it; Compile checks it against the configuration).
func withLoad(o simulateOpts, set map[string]bool, sc *simulate.Scenario) error {
	if !set["load"] && !set["load-file"] && !set["load-model"] && !set["load-interval"] && !set["load-intervals"] {
		return nil
	}
	c := sc.Capacity
	if c == nil {
		c = &simulate.CapacitySpec{}
		sc.Capacity = c
	}
	if len(o.load) > 0 && c.Load == nil {
		c.Load = map[string]float64{}
	}
	for k, v := range o.load {
		c.Load[k] = v
	}
	if set["load-file"] {
		abs, err := filepath.Abs(*o.loadFile)
		if err != nil {
			return err
		}
		c.LoadFile = abs
	}
	if set["load-model"] {
		c.Model = *o.loadModel
	}
	if set["load-interval"] {
		c.Interval = simulate.Duration(*o.loadInterval)
	}
	if set["load-intervals"] {
		c.Intervals = *o.loadIntervals
	}
	return nil
}

// simulateCmd predicts what users see through resolver caches: it runs
// a scenario against the configuration's compiled policies (node does
// the loading, package simulate the rest) and writes the files.
func simulateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("simulate", stderr)
	o := simulateFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "steer simulate: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (flags only)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *o.out == "":
		return usageErr("--out DIR is required")
	case *o.scenario == "" && *o.fromLog == "":
		return usageErr("--scenario FILE or --from-log QUERYLOG is required")
	case set["runs"] && *o.runs < 1:
		return usageErr("--runs %d: want 1 or more", *o.runs)
	case *o.fromLog == "" && (set["ttl"] || set["record"] || set["sample"]):
		return usageErr("--ttl, --record and --sample go with --from-log")
	case set["sample"] && !(*o.sample > 0 && *o.sample <= 1):
		return usageErr("--sample %v: want a fraction above 0 and at most 1, as query_log.sample", *o.sample)
	case set["ttl"] && *o.ttl <= 0:
		return usageErr("--ttl %s: want a positive duration such as 60s", *o.ttl)
	}
	if err := loadFlagsErr(o, set); err != nil {
		return usageErr("%v", err)
	}
	if err := os.MkdirAll(*o.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "steer simulate:", err)
		return 1
	}

	var sc *simulate.Scenario
	if *o.scenario != "" {
		var err error
		if sc, err = simulate.LoadScenario(*o.scenario); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	path, _ := configPath(*o.config)
	base, err := node.SimulateBase(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *o.fromLog != "" {
		pop, code := populationFromLog(o, sc, base, stdout, stderr)
		if pop == nil || sc == nil {
			return code // without --scenario: the population is the result
		}
		sc = withTimeline(pop, sc)
	}
	if set["seed"] {
		sc.Seed = o.seed
	}
	if set["runs"] {
		sc.Runs = *o.runs
	}
	if err := withLoad(o, set, sc); err != nil {
		return usageErr("%v", err)
	}
	model, err := simulate.Compile(sc, base)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	before := dirState(*o.out)
	fmt.Fprintf(stderr, "simulating %s: %d runs of %s in %s bins; %d client subnets, %d resolvers, %d phases\n",
		model.Record, model.Runs, simulate.Duration(model.Duration), simulate.Duration(model.Bin), len(model.Subnets), len(model.Resolvers), len(model.Phases))
	res, err := simulate.Run(ctx, model, simulate.Options{})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "steer simulate: interrupted")
		} else {
			fmt.Fprintln(stderr, "steer simulate:", err)
		}
		return 1
	}
	if err := simulate.Write(*o.out, res); err != nil {
		fmt.Fprintln(stderr, "steer simulate:", err)
		return 1
	}
	if *o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res.JSON()); err != nil {
			fmt.Fprintln(stderr, "steer simulate:", err)
			return 1
		}
	} else {
		sum := simulate.Summary(res)
		if !strings.HasSuffix(sum, "\n") {
			sum += "\n"
		}
		fmt.Fprint(stdout, sum)
	}
	if w := written(*o.out, before); len(w) > 0 {
		fmt.Fprintf(stderr, "wrote %s: %s\n", *o.out, strings.Join(w, " "))
	}
	return 0
}

// populationFromLog reads the query log into a population, writes it to
// DIR/population.yaml and prints what was inferred. The record is
// --record, else the scenario's, else the log's most asked; its TTL
// --ttl, else the scenario's ttl_override, else the log's, else the
// configuration's; the log's sample --sample, else the configuration's
// query_log.sample. It returns nil and the exit code when it fails or
// when it is all there is to do.
func populationFromLog(o simulateOpts, sc *simulate.Scenario, base simulate.Base, stdout, stderr io.Writer) (*simulate.Scenario, int) {
	fo := simulate.FromLogOptions{TTL: *o.ttl, Record: *o.record}
	if sc != nil {
		if fo.Record == "" {
			fo.Record = sc.Record
		}
		if fo.TTL == 0 && sc.TTLOverride != nil {
			fo.TTL = time.Duration(*sc.TTLOverride)
		}
	}
	if fo.Sample = *o.sample; fo.Sample == 0 && base.Config.QueryLog.Path != "" {
		fo.Sample = base.Config.QueryLog.Sample
	}
	// The configuration's TTL for the record ("": not steered there).
	configTTL := func(name string) time.Duration {
		if r := base.Table.Get(dns.CanonicalName(name)); r != nil {
			return time.Duration(r.TTL) * time.Second
		}
		return 0
	}
	read := func(fo simulate.FromLogOptions) (*simulate.Scenario, *simulate.LogReport, error) {
		f, err := os.Open(*o.fromLog)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		pop, rep, err := simulate.FromLog(f, fo)
		if err != nil {
			err = fmt.Errorf("%s: %w", *o.fromLog, err)
		}
		return pop, rep, err
	}
	pop, rep, err := read(fo)
	var ttlFrom string
	if err != nil && fo.TTL == 0 && rep != nil && rep.Record != "" && rep.TTL == 0 {
		// The log has no TTL (steer's does not): the configuration's.
		if fo.TTL = configTTL(rep.Record); fo.TTL == 0 {
			fmt.Fprintf(stderr, "steer simulate: the TTL of %s is neither in %s nor in %s, which does not steer it: give --ttl\n", rep.Record, *o.fromLog, configName(base))
			return nil, 1
		}
		fo.Record = rep.Record
		ttlFrom = fmt.Sprintf("the TTL of %s in %s", rep.Record, configName(base))
		pop, rep, err = read(fo)
	}
	if err != nil {
		fmt.Fprintln(stderr, "steer simulate:", err)
		return nil, 1
	}
	file := filepath.Join(*o.out, "population.yaml")
	if err := os.WriteFile(file, simulate.FromLogYAML(pop, rep), 0o644); err != nil {
		fmt.Fprintln(stderr, "steer simulate:", err)
		return nil, 1
	}
	out := stdout
	if *o.json && sc != nil {
		out = stderr // stdout is the result's JSON
	}
	fmt.Fprint(out, rep.Text())
	if ttlFrom != "" {
		fmt.Fprintf(out, "TTL %s: %s\n", simulate.Duration(fo.TTL), ttlFrom)
	}
	fmt.Fprintf(out, "population: %s\n", file)
	if sc == nil {
		return nil, 0
	}
	return pop, 0
}

// configName names the configuration a base was loaded from.
func configName(b simulate.Base) string {
	if b.Config.FS != nil {
		return "the embedded demo"
	}
	return b.Config.File
}

// withTimeline is the log's population with the scenario's timeline:
// its duration, bins, events, runs, seed and start, and its file (for
// errors and the paths its events name).
func withTimeline(pop, sc *simulate.Scenario) *simulate.Scenario {
	m := *pop
	m.File, m.Line = sc.File, sc.Line
	m.Duration, m.Bin, m.Events = sc.Duration, sc.Bin, sc.Events
	m.Runs, m.Seed = sc.Runs, sc.Seed
	if sc.Start != "" {
		m.Start = sc.Start
	}
	if sc.TTLOverride != nil {
		m.TTLOverride = sc.TTLOverride
	}
	if m.Record == "" {
		m.Record, m.Type = sc.Record, sc.Type
	}
	return &m
}

// dirState is each file's modification time in dir.
func dirState(dir string) map[string]time.Time {
	st := map[string]time.Time{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			st[e.Name()] = fi.ModTime()
		}
	}
	return st
}

// written lists the files of dir that are new or changed since before.
func written(dir string, before map[string]time.Time) []string {
	var out []string
	for name, mt := range dirState(dir) {
		if old, ok := before[name]; !ok || !old.Equal(mt) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
