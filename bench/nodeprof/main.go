// Command nodeprof profiles a steer node in process: it starts one from a
// configuration (node.New and Start, as steer serve does), writes a CPU
// profile of the start, waits until it serves, collects garbage and
// writes a heap profile of what the running node holds; with -reload it
// then reloads once (as POST /v1/reload does) under a second CPU
// profile. It prints the heap in use, the goroutines and the RSS at each
// step. bench/README.md ("Profiling the per-zone cost") has the method.
//
//	nodeprof -config steer.yaml [-out DIR] [-reload [-zones Z1,Z2]] [-from FILE -to FILE2]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/node"
)

func main() {
	cfg := flag.String("config", "steer.yaml", "configuration file")
	out := flag.String("out", ".", "directory for the profiles")
	reload := flag.Bool("reload", false, "reload once after the start (under a CPU profile)")
	from := flag.String("from", "", "with -reload: copy this file over -to first (a changed zone)")
	to := flag.String("to", "", "with -from: the zone file it replaces")
	zones := flag.String("zones", "", "with -reload: reload these zones only (comma-separated), as POST /v1/reload?zone= does")
	verbose := flag.Bool("v", false, "log the node's messages to stderr")
	rate := flag.Int("rate", 4096, "runtime.MemProfileRate: one sample per this many bytes allocated")
	flag.Parse()
	runtime.MemProfileRate = *rate
	if err := run(*cfg, *out, *reload, *from, *to, *zones, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "nodeprof:", err)
		os.Exit(1)
	}
}

func run(cfg, out string, reload bool, from, to, zones string, verbose bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	report("before", time.Time{})
	stopCPU, err := cpuProfile(filepath.Join(out, "start.cpu.pprof"))
	if err != nil {
		return err
	}
	t := time.Now()
	n, err := node.New(node.Options{ConfigPath: cfg, Log: log, Version: "nodeprof"})
	if err != nil {
		stopCPU()
		return err
	}
	if err := n.Start(context.Background()); err != nil {
		stopCPU()
		return err
	}
	stopCPU()
	report("started", t)
	defer n.Shutdown(context.Background())
	if err := heapProfile(filepath.Join(out, "heap.pprof")); err != nil {
		return err
	}
	report("steady", time.Time{})
	if !reload {
		return nil
	}
	if from != "" {
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return err
		}
	}
	if stopCPU, err = cpuProfile(filepath.Join(out, "reload.cpu.pprof")); err != nil {
		return err
	}
	t = time.Now()
	var res node.Result
	if zones != "" {
		res, err = n.ReloadZones(context.Background(), strings.Split(zones, ","))
	} else {
		res, err = n.Reload(context.Background())
	}
	stopCPU()
	if err != nil {
		return err
	}
	report("reloaded", t)
	fmt.Printf("reload: took %s, changed %s\n", res.Took, strings.Join(res.Changed, "; "))
	return heapProfile(filepath.Join(out, "heap-after-reload.pprof"))
}

func cpuProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func heapProfile(path string) error {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}

// report prints the heap in use, the goroutines and the RSS.
func report(step string, since time.Time) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss := "?"
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				rss = strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
			}
		}
	}
	took := ""
	if !since.IsZero() {
		took = fmt.Sprintf(" took=%v", time.Since(since).Round(time.Millisecond))
	}
	fmt.Printf("%s:%s heap_inuse=%d MiB heap_alloc=%d MiB heap_idle=%d MiB heap_released=%d MiB heap_objects=%d stacks=%d MiB other=%d MiB goroutines=%d rss=%s\n", step, took,
		m.HeapInuse>>20, m.HeapAlloc>>20, m.HeapIdle>>20, m.HeapReleased>>20, m.HeapObjects, m.StackSys>>20,
		(m.Sys-m.HeapSys-m.StackSys)>>20, runtime.NumGoroutine(), rss)
}
