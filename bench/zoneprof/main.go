// Command zoneprof profiles one large zone in process, as a node loads and
// reloads it (bench/README.md, "Profiling the zone store"): the first load
// parsed on every core, then a reload of a second version of the file
// parsed on half of them with the first zone as the one served.
//
//	zoneprof -zone DIR/zone -v2 DIR/zone.v2 [-origin big.test.] [-out DIR]
//
// It prints the live heap after the load (a forced collection), the
// reload's time and the highest live heap sampled during it (every 10 ms,
// /gc/heap/live: what the last collection found live), and the live heap
// once the old zone is dropped. In -out it writes heap-steady.pb.gz,
// cpu-reload.pb.gz and heap-reload.pb.gz (taken at the end of the reload,
// both zones live), for `go tool pprof`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/zone"
)

func main() {
	file := flag.String("zone", "", "the zone file as first loaded")
	v2 := flag.String("v2", "", "the zone file to reload")
	origin := flag.String("origin", "big.test.", "the zone's origin")
	out := flag.String("out", ".", "where the profiles go")
	limit := flag.Float64("limit", 1.5, "soft memory limit during the reload, × the memory in use (0: none), as a node sets it")
	flag.Parse()
	if *file == "" {
		flag.Usage()
		os.Exit(2)
	}
	data, err := os.ReadFile(*file)
	check(err)
	t0 := time.Now()
	z, errs, _ := zone.ParseWith(nil, *origin, *file, data, zone.ParseOptions{Workers: policy.Workers(false)})
	if len(errs) > 0 {
		check(fmt.Errorf("%v", errs))
	}
	zone.NewSet([]*zone.Zone{z}).Precompile()
	load := time.Since(t0)
	data = nil
	steady := liveAfterGC()
	fmt.Printf("load %.2f s, %d records, live heap %.1f MiB (%.0f B/record), Sys %.1f MiB\n",
		load.Seconds(), z.Records, mib(steady), float64(steady)/float64(z.Records), mib(sys()))
	writeHeap(filepath.Join(*out, "heap-steady.pb.gz"))
	if *v2 == "" {
		return
	}
	data, err = os.ReadFile(*v2)
	check(err)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if l := live(); l > peak.Load() {
				peak.Store(l)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	if *limit > 0 {
		debug.SetMemoryLimit(int64(float64(steady) * *limit))
	}
	cpu, err := os.Create(filepath.Join(*out, "cpu-reload.pb.gz"))
	check(err)
	check(pprof.StartCPUProfile(cpu))
	t0 = time.Now()
	nz, errs, _ := zone.ParseWith(nil, *origin, *v2, data, zone.ParseOptions{Workers: policy.Workers(true), Previous: z})
	if len(errs) > 0 {
		check(fmt.Errorf("%v", errs))
	}
	zone.NewSet([]*zone.Zone{nz}).Precompile()
	reload := time.Since(t0)
	pprof.StopCPUProfile()
	cpu.Close()
	close(stop)
	<-done
	debug.SetMemoryLimit(-1)
	both := liveAfterGC()
	writeHeap(filepath.Join(*out, "heap-reload.pb.gz"))
	runtime.KeepAlive(z)
	z, data = nil, nil
	after := liveAfterGC()
	fmt.Printf("reload %.2f s, peak live heap %.1f MiB (%.2f× steady), both zones %.1f MiB, after %.1f MiB (%.2f×)\n",
		reload.Seconds(), mib(peak.Load()), float64(peak.Load())/float64(steady), mib(both), mib(after), float64(after)/float64(steady))
	runtime.KeepAlive(nz)
}

func liveAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	return live()
}

func live() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sys() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Sys - m.HeapReleased
}

func writeHeap(path string) {
	f, err := os.Create(path)
	check(err)
	check(pprof.Lookup("heap").WriteTo(f, 0))
	check(f.Close())
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "zoneprof:", err)
		os.Exit(1)
	}
}
