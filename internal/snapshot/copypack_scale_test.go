package snapshot

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestKeepCopiesScale times the last good copies of many small zones
// kept on a first start (an empty directory) and on a restart (the same
// copies in place), as a pack and as files of their own:
// STEER_BENCH_COPIES=100000 go test -run KeepCopiesScale -v ./internal/snapshot/
func TestKeepCopiesScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STEER_BENCH_COPIES"))
	if n == 0 {
		t.Skip("STEER_BENCH_COPIES not set")
	}
	items := make([]zoneCopy, n)
	for i := range items {
		origin := fmt.Sprintf("cust%06d.com.", i)
		items[i] = zoneCopy{origin, fmt.Appendf(nil, "$ORIGIN %s\n$TTL 3600\n@ 3600 IN SOA ns1.hosting.test. hostmaster.hosting.test. 2026120101 7200 3600 1209600 300\n@ 86400 IN NS ns1.hosting.test.\n@ 86400 IN NS ns2.hosting.test.\n@ IN MX 10 mail\n@ IN TXT \"v=spf1 mx -all\"\n@ IN A 10.0.%d.%d\nwww IN A 10.0.0.1\nwww IN AAAA 2001:db8:0:0::1\nmail IN A 100.64.0.0\nftp IN CNAME www\n", origin, i>>8&255, i&255)}
	}
	modes := []string{"pack", "files"}
	if m := os.Getenv("STEER_BENCH_COPIES_MODE"); m != "" {
		modes = []string{m}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, mode := range modes {
		dir := filepath.Join(t.TempDir(), "zones")
		if mode == "files" {
			defer func(m int) { packMin = m }(packMin)
			packMin = math.MaxInt
		}
		for _, run := range []string{"first start", "restart"} {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			t0, c0 := time.Now(), cpu()
			if f := saveCopies(dir, items); len(f) > 0 {
				t.Fatal(f[0].msg)
			}
			took, cpuTook := time.Since(t0), cpu()-c0
			runtime.ReadMemStats(&ms)
			t.Logf("%s, %s: %v (CPU %v), %d MB allocated", mode, run, took.Round(time.Millisecond), cpuTook.Round(time.Millisecond), (ms.TotalAlloc-before)>>20)
		}
	}
}
