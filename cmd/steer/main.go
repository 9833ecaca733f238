// Command steer is a GeoDNS authoritative nameserver and traffic-steering
// engine.
//
//	steer serve [--config FILE]   run a node (the embedded demo without --config)
//	steer check --config FILE     validate a configuration and everything it names
//	steer explain NAME ...        say why a client gets the answer it gets
//	steer simulate --scenario F   predict what users see through resolver caches
//	steer dnssec keygen|ds ZONE   make a zone's DNSSEC keys, print its DS records
//	steer version                 print the version
//
// This package parses flags, turns signals into calls of the running node
// (internal/node) and prints; the node does the rest.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/node"
	"github.com/steer-dns/steer/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "explain":
		return explainCmd(args[1:], stdout, stderr)
	case "simulate":
		return simulateCmd(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprint(stdout, version.Get().String())
		return 0
	case "fleet":
		return fleetCmd(args[1:], stdout, stderr)
	case "dnssec":
		return dnssecCmd(args[1:], stdout, stderr)
	case "rum":
		return rumCmd(args[1:], stdout, stderr)
	case "completion":
		return completionCmd(args[1:], stdout, stderr)
	case "manpage":
		return manpageCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return 0
	default:
		fmt.Fprintf(stderr, "steer: unknown command %q\n\n%s", args[0], usage())
		return 2
	}
}

// DefaultConfig is the configuration used when --config is not given and
// the file exists; the STEER_DEFAULT_CONFIG environment variable replaces
// it (tests, and installs under another prefix).
const DefaultConfig = "/etc/steer/steer.yaml"

func defaultConfig() string {
	if p := os.Getenv("STEER_DEFAULT_CONFIG"); p != "" {
		return p
	}
	return DefaultConfig
}

// configPath applies the default: --config when given, else the default
// path when it exists, else "" (the embedded demo) and why.
func configPath(flagValue string) (path, demoWhy string) {
	if flagValue != "" {
		return flagValue, ""
	}
	def := defaultConfig()
	if _, err := os.Stat(def); err == nil {
		return def, ""
	}
	return "", "no --config and no " + def + ": serving the embedded demo"
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	o := checkFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path, _ := configPath(*o.config)
	if path == "" {
		fmt.Fprintf(stderr, "steer check: --config FILE is required (there is no %s)\n", defaultConfig())
		return 2
	}
	r, err := node.CheckFile(path)
	for _, w := range r.Warnings {
		fmt.Fprintln(stderr, w)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%s)\n", path, r.Summary)
	fmt.Fprintf(stdout, "state: %s\n", r.StateDir)
	return 0
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
	fs := newFlagSet("serve", stderr)
	o := serveFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	listen, pidFile, watchInterval := o.listen, o.pidFile, o.watchInterval
	log, err := newLogger(*o.logFormat, *o.logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "steer serve:", err)
		return 2
	}
	path, demoWhy := configPath(*o.config)
	if demoWhy != "" {
		log.Warn(demoWhy)
	}
	for _, a := range *listen {
		if _, _, err := net.SplitHostPort(a); err != nil {
			fmt.Fprintf(stderr, "steer serve: --listen %q: want host:port\n", a)
			return 2
		}
	}
	// Take the signals before anything can send one: SIGHUP's default
	// action would kill a server that has just said it is serving.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	if *pidFile != "" {
		if err := os.WriteFile(*pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			log.Error("pid file", "err", err)
			return 1
		}
		defer os.Remove(*pidFile)
	}
	// Loading can take a while (geo databases, zones): SIGTERM during it
	// stops at once, as nothing is listening yet.
	type made struct {
		n   *node.Node
		err error
	}
	ready := make(chan made, 1)
	go func() {
		n, err := node.New(node.Options{ConfigPath: path, Listen: *listen, Log: log, WatchInterval: *watchInterval, Version: version.Get().Short()})
		ready <- made{n, err}
	}()
	var n *node.Node
	hup := false // a SIGHUP during start-up reloads once started
	for n == nil {
		select {
		case m := <-ready:
			if m.err != nil {
				logProblems(log, "configuration rejected", m.err)
				return 1
			}
			n = m.n
		case sig := <-sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGINT {
				sdNotify(log, "STOPPING=1")
				log.Info("stopped during start-up", "signal", sig.String())
				return 0
			}
			hup = hup || sig == syscall.SIGHUP
		}
	}
	if err := n.Start(context.Background()); err != nil {
		logProblems(log, "start failed", err)
		return 1
	}
	// The first snapshot is serving: tell systemd (Type=notify).
	sdNotify(log, "READY=1\nSTATUS=serving")
	reload := func(trigger string) {
		if !sdNotifying() {
			n.RequestReload(trigger)
			return
		}
		// systemd wants RELOADING=1 (with the monotonic time) and READY=1
		// once the reload is done, so "systemctl reload" waits for it. The
		// node numbers its reloads: wait for the one after those done now
		// (one running now may finish first; ours follows it).
		var before uint64
		if lr := n.Status().LastReload; lr != nil {
			before = lr.Seq
		}
		sdNotify(log, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
		n.RequestReload(trigger)
		go func() {
			deadline := time.Now().Add(5 * time.Minute)
			for time.Now().Before(deadline) {
				if lr := n.Status().LastReload; lr != nil && lr.Seq > before {
					status := "serving; last reload applied"
					if !lr.Applied {
						status = "serving; last reload rejected"
					}
					sdNotify(log, "READY=1\nSTATUS="+status)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			sdNotify(log, "READY=1\nSTATUS=serving; reload still running")
		}()
	}
	if hup {
		reload("SIGHUP during start-up")
	}
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			reload("SIGHUP")
		case syscall.SIGUSR1:
			n.ReopenLogs()
		default:
			sdNotify(log, "STOPPING=1")
			log.Info("shutting down", "signal", sig.String())
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			n.Shutdown(ctx)
			cancel()
			return 0
		}
	}
	return 0
}

func logProblems(log *slog.Logger, msg string, err error) {
	var ps diag.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			log.Error(msg, "problem", p.String())
		}
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		log.Error(msg, "problem", line)
	}
}
