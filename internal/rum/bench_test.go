package rum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// benchBatch is a realistic batch: 500 beacons as JSON lines from 2,000
// client /24s and /56s (a fifth IPv6), three sites, browser-style RFC
// 3339 times of the last minute.
func benchBatch(now time.Time) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	site := []string{"fra", "bom", "iad"}
	var b bytes.Buffer
	for i := range 500 {
		n := r.IntN(2000)
		client := fmt.Sprintf("%d.%d.%d.%d", 10+n/256, n%256, r.IntN(256), r.IntN(256))
		if n%5 == 0 {
			client = fmt.Sprintf("2001:db8:%x:%x00::%x", n, r.IntN(256), r.IntN(65536))
		}
		fmt.Fprintf(&b, `{"client":%q,"site":%q,"rtt_ms":%.1f,"time":%q}`+"\n", client, site[i%3], 20+r.Float64()*200,
			now.Add(-time.Duration(r.IntN(60000))*time.Millisecond).Format(time.RFC3339Nano))
	}
	return b.Bytes()
}

// BenchmarkIngest is the intake's work per beacon: parse, check,
// truncate and aggregate (what the listener does after reading the body).
// Run with -cpu 1 for the per-core rate; the target is 50,000 beacons/s.
// BenchmarkJSONDecode is the peer: encoding/json decoding the same lines
// into the same struct, nothing else.
func BenchmarkIngest(b *testing.B) {
	now := time.Now()
	batch := benchBatch(now)
	s := NewStore(Options{Now: func() time.Time { return now }})
	l := Limits{Sites: map[string]bool{"fra": true, "bom": true, "iad": true}}
	var buf []Beacon
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	defer perCPU(b)()
	for range b.N {
		var err error
		if buf, err = Parse(buf[:0], batch, netip.Addr{}, l, now); err != nil {
			b.Fatal(err)
		}
		s.AddBatch(buf)
	}
}

func BenchmarkJSONDecode(b *testing.B) {
	batch := benchBatch(time.Now())
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	defer perCPU(b)()
	for range b.N {
		data := batch
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			var w wire
			if err := json.Unmarshal(data[:i], &w); err != nil {
				b.Fatal(err)
			}
			data = data[i+1:]
		}
	}
}

// perCPU reports beacons per second of wall time and per second of the
// process's CPU time (user and system, GC included): on a shared machine
// the wall rate is what the scheduler left, the CPU rate what one core
// does. x_target is the CPU rate over the 50,000 beacons/s target.
func perCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		n := float64(b.N) * 500
		used := (cpu() - start).Seconds()
		b.ReportMetric(n/b.Elapsed().Seconds(), "beacons/s")
		if used > 0 {
			b.ReportMetric(n/used, "beacons/cpu-s")
			b.ReportMetric(n/used/50000, "x_target")
		}
	}
}
