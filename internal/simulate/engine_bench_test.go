package simulate

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// dayModel is a 24-hour scenario against the Larkbook demo record: 5,000
// client subnets from the Larkbook city database's networks in three
// groups with daily profiles (Americas 600 q/s: Brazil /24s and US /56s;
// Europe 250 q/s: German /24s; Asia 150 q/s: Japanese and Indian /24s),
// served 30 % by a public resolver sending ECS /24 and /56 to 8 caches
// (caching per source prefix unless honors), 20 % by a public resolver
// without ECS in Mountain View and 50 % by 400 ISP resolvers without ECS,
// each near its users.
func dayModel(tb testing.TB, runs int, honors bool) *Model {
	table := testTable(tb, testConfigYAML(tb, dnstest.LarkbookRecord(), "larkbook-city.mmdb"))
	m := testModel(tb, table, "shop.example.com", 24*time.Hour, time.Minute, runs)
	cat := func(ps ...[]netip.Prefix) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	am := addGroup(m, "americas", 600, cat(testSubnets("200.147.0.0/24", 24, 256), testSubnets("2001:4860::/56", 56, 1744)))
	eu := addGroup(m, "europe", 250, testSubnets("80.128.0.0/24", 24, 1500))
	as := addGroup(m, "asia", 150, cat(testSubnets("126.0.0.0/24", 24, 750), testSubnets("49.36.0.0/24", 24, 750)))
	m.Groups[0].Diurnal = &Diurnal{Trough: 0.3, Peak: 20 * time.Hour}
	m.Groups[1].Diurnal = &Diurnal{Trough: 0.3, Peak: 14 * time.Hour}
	m.Groups[2].Diurnal = &Diurnal{Trough: 0.3, Peak: 8 * time.Hour}
	all := append(append(append([]int32(nil), am...), eu...), as...)
	addSite(m, Site{Name: "bigpublic-ecs", ECS: true, SourceV4: 24, SourceV6: 56, HonorsScope: honors}, 1, 8, 0.3, all)
	us := addSite(m, Site{Name: "bigpublic-us"}, 1, 1, 0.2, all)
	m.Resolvers[len(m.Resolvers)-1].Addr = netip.MustParseAddr("8.8.8.8")
	_ = us
	addSite(m, Site{Name: "isp", Violators: 0.0874, ExtendTo: time.Hour}, 400, 1, 0.5, all)
	return m
}

// benchRuns is the number of runs per set: 20 (the default) with
// STEER_SIM_BENCH_FULL=1, else few (2, or 1 for the heavy variant) so
// that CI's one pass stays cheap.
func benchRuns(heavy bool) int {
	if ok, _ := strconv.ParseBool(os.Getenv("STEER_SIM_BENCH_FULL")); ok {
		return 20
	}
	if heavy {
		return 1
	}
	return 2
}

func benchDay(b *testing.B, honors bool) {
	runs := benchRuns(!honors)
	m := dayModel(b, runs, honors)
	b.ResetTimer()
	var misses float64
	for b.Loop() {
		start, cpu := time.Now(), processCPU()
		r, err := Run(context.Background(), m, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/set")
		b.ReportMetric((processCPU() - cpu).Seconds(), "cpu-s/set")
		misses = 0
		for _, bin := range r.Bins {
			misses += bin.AuthQPS * r.Bin.Seconds()
		}
	}
	b.ReportMetric(float64(runs), "runs/set")
	b.ReportMetric(misses, "misses/run")
}

// BenchmarkDay5000Subnets: the 24-hour, 5,000-subnet scenario with the
// ECS resolver honouring steer's scopes (per-partition cache entries).
// "s/set" is the wall time of one Run of runs/set runs, "cpu-s/set" the
// CPU time it took (over all cores; on a busy machine the wall time
// overstates what two idle cores would take).
func BenchmarkDay5000Subnets(b *testing.B) { benchDay(b, true) }

// BenchmarkDay5000SubnetsPerPrefix: the same with the ECS resolver
// caching per /24 and /56 (ignoring the scope): 40,000 cache entries.
func BenchmarkDay5000SubnetsPerPrefix(b *testing.B) { benchDay(b, false) }
