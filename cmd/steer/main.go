// Command steer is a GeoDNS authoritative nameserver and traffic-steering
// engine.
//
//	steer serve [--config FILE]   run the server (the embedded demo without --config)
//	steer check --config FILE     validate a configuration and everything it names
//	steer explain --config FILE NAME [--type A] [--ecs PREFIX] [--from IP] [--json]
//	                              say why a client gets the answer it gets
//	steer version                 print the version
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/querylog"
	"github.com/steer-dns/steer/internal/snapshot"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `steer: a GeoDNS authoritative nameserver

usage:
  steer serve [--config FILE] [--log-format text|json] [--log-level LEVEL]
  steer check --config FILE
  steer explain [--config FILE] NAME [--type A] [--ecs PREFIX] [--from IP] [--json]
  steer version

Without --config, serve runs the embedded demo configuration
(zone example.com on 127.0.0.1:5353 and [::1]:5353).
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "explain":
		return explainCmd(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "steer", versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "steer: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + bi.GoVersion
	}
	return v
}

// loadConfig reads path, or the embedded demo when path is empty.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.LoadDemo()
	}
	return config.Load(path)
}

// load reads the configuration and everything it names into a snapshot.
func load(path string) (*snapshot.Snapshot, diag.Problems, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	return snapshot.Build(cfg)
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file to check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "steer check: --config FILE is required")
		return 2
	}
	snap, warns, err := load(*path)
	for _, w := range warns {
		fmt.Fprintln(stderr, w.File+lineSuffix(w.Line)+": warning: "+w.Msg)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	lerrs, lwarns := checkLatencyFiles(snap.Config)
	for _, w := range lwarns {
		fmt.Fprintln(stderr, w)
	}
	if len(lerrs) > 0 {
		for _, e := range lerrs {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%s)\n", *path, snap.Summary())
	return 0
}

func lineSuffix(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(":%d", n)
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", format)
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	watchInterval := fs.Duration("watch-interval", 5*time.Second, "how often geo database files are checked for changes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := newLogger(*logFormat, *logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "steer serve:", err)
		return 2
	}
	source := *path
	if source == "" {
		source = "embedded demo"
	}

	// Take the signals before anything can send one: SIGHUP's default
	// action would kill a server that has just said it is serving.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)

	snap, warns, err := load(*path)
	logWarnings(log, warns)
	if err != nil {
		logProblems(log, "configuration rejected", err)
		return 1
	}
	srv := dnsserver.New(snap, log)
	met := metrics.New()
	srv.Handler().SetMetrics(met)
	if c := snap.Config.QueryLog; c.Path != "" {
		path := c.Path
		if path != "stdout" {
			path = snap.Config.Resolve(path)
		}
		ql, err := querylog.Open(querylog.Options{Path: path, Sample: c.Sample})
		if err != nil {
			log.Error("query log", "err", err)
			return 1
		}
		defer ql.Close()
		srv.Handler().SetQueryLog(ql)
		met.SetQueryLog(func() (uint64, uint64) { return ql.Written(), ql.Dropped() })
	}
	// Health checks live across reloads; every change recomputes which
	// pools and addresses the current snapshot may answer with.
	hc := newHealth(log, srv)
	hc.metrics = met
	defer hc.manager.Close()
	if f := snap.Config.Health.StateFile; f != "" {
		hc.stateFile = snap.Config.Resolve(f)
		if err := hc.manager.LoadState(hc.stateFile); err != nil {
			log.Warn("health state file not restored", "file", hc.stateFile, "err", err)
		}
		defer hc.save()
	}
	met.SetHealth(hc.counts)
	hc.wireMetrics(met)
	hc.prepare(snap)
	// The latency map lives across reloads too; its files are read before
	// the first answer, so every network starts from measurements.
	lw := newLatency(log, func() *policy.Table { return srv.Handler().Snapshot().Policies })
	lw.met = met
	met.SetLatency(lw.info)
	lw.prepare(snap)
	if err := srv.Start(); err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	ac, err := startAnycast(log, snap, srv, hc, met)
	if err != nil {
		log.Error("anycast", "err", err)
		return 1
	}
	defer ac.stop()
	if c := snap.Config.API; c.Listen != "" {
		stop, err := startAPI(log, c, snap.Config, &backend{log: log, srv: srv, hc: hc, lat: lw, ac: ac, path: *path, source: source}, met)
		if err != nil {
			log.Error("admin API", "err", err)
			return 1
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stop(ctx)
		}()
	}
	// Geo databases are reloaded when their files change, and the health
	// feed file is applied when it does; config and zone files only on
	// SIGHUP (a half-written zone must never go live). Each watcher takes
	// its baseline before its file is read, so no change slips between.
	ctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if f := snap.Config.Health.FeedFile; f != "" {
		fd := &feed{path: snap.Config.Resolve(f), hc: hc, log: log}
		w := newWatcher(func() []string { return []string{fd.path} })
		if err := fd.load(); err != nil {
			log.Error("health feed rejected", "err", err)
		}
		go w.run(ctx, *watchInterval, func() {
			if err := fd.load(); err != nil {
				log.Error("health feed rejected; the previous one stays", "err", err)
			}
		})
	}
	go lw.run(ctx, *watchInterval)
	geoChanged := make(chan struct{}, 1)
	go newWatcher(func() []string { return srv.Handler().Snapshot().GeoFiles }).run(ctx, *watchInterval, func() {
		select {
		case geoChanged <- struct{}{}:
		default:
		}
	})
	log.Info("serving", "config", source, "version", version, "data", snap.Summary())

	for {
		var sig os.Signal
		select {
		case <-geoChanged:
			log.Info("a geo database file changed; reloading")
			reload(log, srv, hc, lw, *path, source)
			continue
		case sig = <-sigs:
		}
		if sig == syscall.SIGHUP {
			reload(log, srv, hc, lw, *path, source)
			continue
		}
		log.Info("shutting down", "signal", sig.String())
		ac.drain() // withdraw first; DNS keeps answering for the drain period
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := srv.Shutdown(ctx)
		cancel()
		if err != nil {
			log.Warn("shutdown did not finish in time", "err", err)
		}
		log.Info("stopped")
		return 0
	}
}

// reload re-reads the configuration and swaps it in only when all of it is
// valid; otherwise the old one keeps serving.
func reload(log *slog.Logger, srv *dnsserver.Server, hc *healthWiring, lw *latencyWiring, path, source string) error {
	start := time.Now()
	snap, warns, err := load(path)
	logWarnings(log, warns)
	if err != nil {
		logProblems(log, "reload rejected; still serving the previous configuration", err)
		hc.reloaded(false)
		return err
	}
	hc.prepare(snap)
	lw.prepare(snap)
	if err := srv.Apply(snap); err != nil {
		log.Error("reload rejected; still serving the previous configuration", "err", err)
		hc.reloaded(false)
		return err
	}
	hc.reloaded(true)
	lw.refresh()
	log.Info("reloaded", "config", source, "data", snap.Summary(), "took", time.Since(start).Round(time.Microsecond))
	return nil
}

func logWarnings(log *slog.Logger, warns diag.Problems) {
	for _, w := range warns {
		log.Warn(w.String())
	}
}

func logProblems(log *slog.Logger, msg string, err error) {
	var ps diag.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			log.Error(msg, "problem", p.String())
		}
		return
	}
	log.Error(msg, "err", strings.TrimSpace(err.Error()))
}

func explainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	qtype := fs.String("type", "A", "query type")
	ecsFlag := fs.String("ecs", "", "client subnet to send, e.g. 49.36.0.0/24 (default: none)")
	from := fs.String("from", "127.0.0.1", "resolver address the query comes from")
	asJSON := fs.Bool("json", false, "print JSON")
	// Accept the name anywhere among the flags: Go's flag package stops at
	// the first non-flag argument, so parse again after it.
	var name string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fmt.Fprintf(stderr, "steer explain: one NAME only (got %q and %q)\n", name, fs.Arg(0))
			return 2
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if name == "" {
		fmt.Fprintln(stderr, "steer explain: a NAME to explain is required")
		return 2
	}
	t, ok := dns.StringToType[strings.ToUpper(*qtype)]
	if !ok {
		fmt.Fprintf(stderr, "steer explain: unknown type %q\n", *qtype)
		return 2
	}
	req := explain.Request{Name: name, Qtype: t}
	var err error
	if req.From, err = netip.ParseAddr(*from); err != nil {
		fmt.Fprintf(stderr, "steer explain: --from %q is not an IP address\n", *from)
		return 2
	}
	if *ecsFlag != "" {
		if req.ECS, err = netip.ParsePrefix(*ecsFlag); err != nil {
			if a, err2 := netip.ParseAddr(*ecsFlag); err2 == nil {
				req.ECS = netip.PrefixFrom(a, a.BitLen())
			} else {
				fmt.Fprintf(stderr, "steer explain: --ecs %q is not a prefix such as 49.36.0.0/24\n", *ecsFlag)
				return 2
			}
		}
	}
	snap, _, err := load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Explain with the latency files as a server would start with them.
	newLatency(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil).prepare(snap)
	rep, err := explain.Run(dnsserver.NewHandler(snap), req)
	if err != nil {
		fmt.Fprintln(stderr, "steer explain:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	fmt.Fprint(stdout, rep.Text())
	return 0
}
