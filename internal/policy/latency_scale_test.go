package policy_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/policy"
)

// latencyNames is n steered names over p named policies that steer by
// latency among the same three sites (name i on policy i mod p). Each
// policy sends its own /16 to mumbai first, so the p policies compile p
// partitions; each name has its own addresses.
func latencyNames(n, p int) string {
	var b strings.Builder
	b.WriteString("\npolicies:\n")
	for k := range p {
		fmt.Fprintf(&b, "  p%d:\n    rules:\n      - match: { cidr: [10.%d.0.0/16] }\n        pool: mumbai\n"+
			"      - default: { by: latency, fallback: [virginia, frankfurt, mumbai] }\n", k, k)
	}
	b.WriteString("records:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - { name: s%d.example.com, ttl: 60, policy: p%d, pools: {"+
			" mumbai: { address: 203.0.113.%d, location: { lat: 19.08, lon: 72.88 } },"+
			" frankfurt: { address: 198.51.100.%d, location: { lat: 50.11, lon: 8.68 } },"+
			" virginia: { address: 192.0.2.%d, location: { lat: 38.95, lon: -77.45 } } } }\n",
			i, i%p, i%250+1, i%250+1, i%250+1)
	}
	return b.String()
}

// latencyNamesTable compiles latencyNames(n, p) against the testdata city
// and ASN databases.
func latencyNamesTable(tb testing.TB, n, p int) *policy.Table {
	tb.Helper()
	yaml := configYAML(tb, []string{cityDB, asnDB}, "")
	yaml = strings.TrimSuffix(yaml, "records:") + latencyNames(n, p)
	return mustBuild(tb, yaml)
}

// BenchmarkLatencyUpdateNames measures one latency update (SetLatency
// after the store has applied 30,000 measurements over 10,000 IPv4 /24s)
// for n names over p policies: its cost follows the policies, not the
// names. update-ms is the evaluation's time, networks the networks it
// evaluated.
func BenchmarkLatencyUpdateNames(b *testing.B) {
	for _, c := range []struct{ names, policies int }{
		{1, 1}, {5, 5}, {20, 20}, {80, 80},
		{10000, 1}, {10000, 5}, {10000, 20}, {10000, 80},
	} {
		b.Run(fmt.Sprintf("names=%d/policies=%d", c.names, c.policies), func(b *testing.B) {
			runtime.LockOSThread() // threadCPU measures this thread
			defer runtime.UnlockOSThread()
			table := latencyNamesTable(b, c.names, c.policies)
			live := policy.NewLive(table, policy.LiveOptions{})
			o := latency.Options{HalfLife: 5 * time.Minute}
			store, h := latency.NewStore(o), policy.NewLatencyMemory(o)
			now := t0
			ms := bigUpdate(30000, now)
			store.Update(ms, now)
			live.SetLatency(store.Map(), h, store.Updates(), now) // the initial choices
			var took, cpu time.Duration
			var st policy.LatencyStats
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				now = now.Add(time.Second)
				for j := range ms {
					ms[j].MeasuredAt = now
				}
				store.Update(ms, now)
				b.StartTimer()
				cpu0 := threadCPU()
				st = live.SetLatency(store.Map(), h, store.Updates(), now)
				cpu += threadCPU() - cpu0
				took += st.Took
			}
			b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "update-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "update-cpu-ms")
			b.ReportMetric(float64(st.Networks), "networks")
		})
	}
}
