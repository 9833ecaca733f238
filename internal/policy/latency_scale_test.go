package policy_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
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

// latencyNamesYAML is latencyNames(n, p) against the testdata city and ASN
// databases.
func latencyNamesYAML(tb testing.TB, n, p int) string {
	return strings.TrimSuffix(configYAML(tb, []string{cityDB, asnDB}, ""), "records:") + latencyNames(n, p)
}

// latencyNamesTable compiles latencyNames(n, p).
func latencyNamesTable(tb testing.TB, n, p int) *policy.Table {
	tb.Helper()
	return mustBuild(tb, latencyNamesYAML(tb, n, p))
}

// bigNames is latencyNames(10000, 80) parsed once: parsing 10,000 records
// takes longer than compiling them, and a benchmark of n names over p <= 80
// policies is its first n records pointed at policies i mod p.
var bigNames struct {
	once sync.Once
	cfg  *config.Config
}

func latencyNamesBuilt(tb testing.TB, n, p int) *policy.Table {
	tb.Helper()
	bigNames.once.Do(func() { bigNames.cfg = parseConfig(tb, latencyNamesYAML(tb, 10000, 80)) })
	cfg := *bigNames.cfg
	cfg.Records = slices.Clone(cfg.Records[:n])
	for i := range cfg.Records {
		cfg.Records[i].Policy = fmt.Sprintf("p%d", i%p)
	}
	table, _, err := policy.Build(&cfg, geoSetFor(tb, cityDB, asnDB))
	if err != nil {
		tb.Fatal(err)
	}
	return table
}

// BenchmarkLatencyUpdateNames measures one latency update (SetLatency
// after the store has applied 30,000 measurements over 10,000 IPv4 /24s,
// each /24 a CIDR cell) for n names over p policies: its cost follows the
// policies, not the names. update-ms is the evaluation's time,
// update-cpu-ms the CPU time it took (what it costs apart from waiting for
// a core on a busy machine), networks the networks it evaluated.
func BenchmarkLatencyUpdateNames(b *testing.B) {
	cases := []struct{ names, policies int }{
		// One compiled partition: today's per-record cost was linear
		// in these records (1 / 20 / 80 took 24 ms / 336 ms / 1.67 s).
		{1, 1}, {20, 1}, {80, 1},
		// 10,000 names: the cost follows the policies.
		{10000, 1}, {10000, 5},
	}
	// 20 and 80 policies show the growth with policies; they cost the
	// test command's single run most of this benchmark's time, so they
	// run when asked: STEER_BENCH_ALL=1.
	if os.Getenv("STEER_BENCH_ALL") == "1" {
		cases = append(cases, struct{ names, policies int }{10000, 20}, struct{ names, policies int }{10000, 80})
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("names=%d/policies=%d", c.names, c.policies), func(b *testing.B) {
			runtime.LockOSThread() // threadCPU measures this thread
			defer runtime.UnlockOSThread()
			table := latencyNamesBuilt(b, c.names, c.policies)
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
			b.ReportMetric(float64(st.Evaluated), "networks")
		})
	}
}
