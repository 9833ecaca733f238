// Command steer is a GeoDNS authoritative nameserver and traffic-steering
// engine.
//
//	steer serve [--config FILE]   run a node (the embedded demo without --config)
//	steer check --config FILE     validate a configuration and everything it names
//	steer explain NAME ...        say why a client gets the answer it gets
//	steer version                 print the version
//
// This package parses flags, turns signals into calls of the running node
// (internal/node) and prints; the node does the rest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/node"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `steer: a GeoDNS authoritative nameserver

usage:
  steer serve [--config FILE] [--listen ADDR]... [--pid-file FILE]
              [--log-format text|json] [--log-level LEVEL] [--watch-interval 5s]
  steer check --config FILE
  steer explain NAME [--config FILE | --api URL [--token-file FILE]] [--offline]
              [--type A] [--ecs PREFIX] [--from IP] [--json]
  steer version

Without --config, serve runs the embedded demo configuration
(zone example.com on 127.0.0.1:5353 and [::1]:5353).
Signals: SIGHUP reloads the configuration and zones and reopens the query
log; SIGUSR1 reopens the query log only; SIGTERM and SIGINT stop.
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
	summary, warns, err := node.Check(*path)
	for _, w := range warns {
		fmt.Fprintln(stderr, w)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%s)\n", *path, summary)
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

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "configuration file (default: the embedded demo)")
	var listen listFlag
	fs.Var(&listen, "listen", "address to serve DNS on, host:port (repeatable; replaces the config's listen)")
	pidFile := fs.String("pid-file", "", "write the process ID to this file")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	watchInterval := fs.Duration("watch-interval", 5*time.Second, "how often geo database, latency and health feed files are checked for changes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := newLogger(*logFormat, *logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "steer serve:", err)
		return 2
	}
	for _, a := range listen {
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
		n, err := node.New(node.Options{ConfigPath: *path, Listen: listen, Log: log, WatchInterval: *watchInterval, Version: versionString()})
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
	if hup {
		n.RequestReload("SIGHUP during start-up")
	}
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			n.RequestReload("SIGHUP")
		case syscall.SIGUSR1:
			n.ReopenLogs()
		default:
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
