// Command heapprof starts a steer node in this process from a
// configuration file, waits until it serves, and writes a heap profile
// (runtime/pprof, after two collections) of what the serving node keeps:
// the method behind bench/README.md's "where each name's bytes go". With
// -scrape it first fetches the admin API's /metrics (the configuration must
// have api.listen) and writes a second profile after it, so the two show
// what a scrape leaves behind. It prints the live heap and the process's
// RSS at each step.
//
//	heapprof -config steer.yaml -out n1000.heap [-scrape]
//
// Two profiles at different sizes of the same shape give each added name's
// bytes by call site:
//
//	go tool pprof -sample_index=inuse_space -top -diff_base n1000.heap n10000.heap
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/node"
)

func main() {
	cfg := flag.String("config", "", "steer.yaml (required)")
	out := flag.String("out", "", "heap profile to write (required); with -scrape also OUT.scraped")
	scrape := flag.Bool("scrape", false, "scrape /metrics once and profile again")
	rate := flag.Int("rate", 4096, "runtime.MemProfileRate: bytes between samples (Go's default, 512 KiB, misses most small objects)")
	flag.Parse()
	runtime.MemProfileRate = *rate
	if *cfg == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*cfg, *out, *scrape); err != nil {
		fmt.Fprintln(os.Stderr, "heapprof:", err)
		os.Exit(1)
	}
}

func run(cfg, out string, scrape bool) error {
	t0 := time.Now()
	n, err := node.New(node.Options{ConfigPath: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if err := n.Start(context.Background()); err != nil {
		return err
	}
	defer n.Shutdown(context.Background())
	fmt.Printf("serving after %.2f s\n", time.Since(t0).Seconds())
	time.Sleep(time.Second) // the start-up's deferred work (the release of its garbage)
	if err := profile(out, "serving"); err != nil {
		return err
	}
	if !scrape {
		return nil
	}
	addr := n.APIAddr()
	if addr == "" {
		return fmt.Errorf("%s: -scrape needs api.listen", cfg)
	}
	t := time.Now()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	fmt.Printf("scrape: %d bytes in %.1f ms\n", size, float64(time.Since(t).Microseconds())/1000)
	return profile(out+".scraped", "after a scrape")
}

// profile collects twice (the second frees what finalizers of the first
// released) and writes the heap profile to path.
func profile(path, what string) error {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%s: live heap %.1f MiB in %d objects, RSS %s\n", what, float64(ms.HeapAlloc)/(1<<20), ms.HeapObjects, rss())
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
