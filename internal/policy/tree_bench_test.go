package policy_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// flatAndTree are records over the same six pools compiled against the
// embedded database: one flat geoproximity rule; a three-level tree
// (geoproximity over regions, each a failover from a weighted pair to a
// standby), the Route 53 shape; and the same tree with failover
// pairs, whose cost is the nesting alone (the weighted pair adds a
// random draw, which a flat split pays too).
const flatAndTree = `
  - name: flat.example.com
    pools:
      ap-1: { address: 203.0.113.10, location: { lat: 19.08, lon: 72.88 } }
      ap-2: { address: 203.0.113.11, location: { lat: 19.08, lon: 72.88 } }
      eu-1: { address: 198.51.100.20, location: { lat: 50.11, lon: 8.68 } }
      eu-2: { address: 198.51.100.21, location: { lat: 50.11, lon: 8.68 } }
      us-1: { address: 192.0.2.30, location: { lat: 38.95, lon: -77.45 } }
      us-2: { address: 192.0.2.31, location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK] }
        pool: ap-1
      - default: { by: geoproximity, fallback: [ap-1, eu-1, us-1] }
  - name: tree.example.com
    pools:
      ap-1: { address: 203.0.113.10 }
      ap-2: { address: 203.0.113.11 }
      eu-1: { address: 198.51.100.20 }
      eu-2: { address: 198.51.100.21 }
      us-1: { address: 192.0.2.30 }
      us-2: { address: 192.0.2.31 }
    groups:
      ap-pair: { split: [{ pool: ap-1, weight: 90 }, { pool: ap-2, weight: 10 }] }
      eu-pair: { split: [{ pool: eu-1, weight: 90 }, { pool: eu-2, weight: 10 }] }
      us-pair: { split: [{ pool: us-1, weight: 90 }, { pool: us-2, weight: 10 }] }
      ap: { failover: [ap-pair, ap-2], location: { lat: 19.08, lon: 72.88 } }
      eu: { failover: [eu-pair, eu-2], location: { lat: 50.11, lon: 8.68 } }
      us: { failover: [us-pair, us-2], location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK] }
        pool: ap
      - default: { by: geoproximity, fallback: [ap, eu, us] }
  - name: failover.example.com
    pools:
      ap-1: { address: 203.0.113.10 }
      ap-2: { address: 203.0.113.11 }
      eu-1: { address: 198.51.100.20 }
      eu-2: { address: 198.51.100.21 }
      us-1: { address: 192.0.2.30 }
      us-2: { address: 192.0.2.31 }
    groups:
      ap-pair: { failover: [ap-1, ap-2] }
      eu-pair: { failover: [eu-1, eu-2] }
      us-pair: { failover: [us-1, us-2] }
      ap: { failover: [ap-pair, ap-2], location: { lat: 19.08, lon: 72.88 } }
      eu: { failover: [eu-pair, eu-2], location: { lat: 50.11, lon: 8.68 } }
      us: { failover: [us-pair, us-2], location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK] }
        pool: ap
      - default: { by: geoproximity, fallback: [ap, eu, us] }
`

var (
	treeOnce  sync.Once
	treeTable *policy.Table
	treeLive  *policy.Live
)

func treeTables(tb testing.TB) *policy.Table {
	tb.Helper()
	treeOnce.Do(func() {
		treeTable = mustBuild(tb, configYAML(tb, []string{embedDB}, flatAndTree))
		treeLive = policy.NewLive(treeTable, policy.LiveOptions{})
		treeLive.SetHealth(func(netip.Addr, string) bool { return true }, nil)
	})
	return treeTable
}

func treeRecords(tb testing.TB) (flat, tree *policy.Record) {
	t := treeTables(tb)
	return t.Get("flat.example.com."), t.Get("tree.example.com.")
}

// BenchmarkTreeDecide compares a steered decision through the three-level
// tree with the flat rule (issue 17: ≤ 1.1×, no allocation).
func BenchmarkTreeDecide(b *testing.B) {
	flat, tree := treeRecords(b)
	_, _, addrs := embedded(b)
	for _, c := range []struct {
		name string
		r    *policy.Record
	}{{"flat", flat}, {"tree3", tree}, {"tree3-failover", treeTables(b).Get("failover.example.com.")}} {
		b.Run(c.name, func(b *testing.B) {
			q := policy.Query{Qtype: dns.TypeA}
			v4 := addrs[false]
			var sink uint64
			now := time.Now().Unix()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Client = v4[i&(len(v4)-1)]
				q.ClientBits = 32
				sink += treeLive.Decide(c.r, &q, now).Pools // as the server: with the groups' resolutions
			}
			_ = sink
		})
	}
}

func TestTreeDecideAllocatesNothing(t *testing.T) {
	_, tree := treeRecords(t)
	q := policy.Query{Qtype: dns.TypeA, Up: tree.Enabled &^ 1, Client: netip.MustParseAddr("49.36.1.1"), ClientBits: 32}
	if n := testing.AllocsPerRun(1000, func() { tree.Decide(&q) }); n != 0 {
		t.Errorf("Decide through the tree allocates %v times", n)
	}
	d := tree.Decide(&q)
	if d.Pools != 0b10 {
		t.Errorf("ap-1 down: %s, want ap-2 (the pair's other pool)", poolNames(tree, d.Pools))
	}
}

// BenchmarkTreeVsFlat runs the two in alternating blocks of 1,024
// queries, each block timed, so that the noise of a shared machine falls
// on both alike, and reports each one's ns/query and their ratio.
func BenchmarkTreeVsFlat(b *testing.B) {
	flat, split := treeRecords(b)
	fo := treeTables(b).Get("failover.example.com.")
	_, _, addrs := embedded(b)
	v4 := addrs[false]
	const block = 1024
	var tFlat, tSplit, tFo time.Duration
	var sink uint64
	run := func(r *policy.Record, off int) time.Duration {
		q := policy.Query{Qtype: dns.TypeA, ClientBits: 32}
		start := time.Now()
		for i := range block {
			q.Client = v4[(off+i)&(len(v4)-1)]
			sink += treeLive.Decide(r, &q, start.Unix()).Pools
		}
		return time.Since(start)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i += 3 * block {
		switch n % 3 {
		case 0:
			tFlat += run(flat, i)
			tFo += run(fo, i)
			tSplit += run(split, i)
		case 1:
			tFo += run(fo, i)
			tSplit += run(split, i)
			tFlat += run(flat, i)
		default:
			tSplit += run(split, i)
			tFlat += run(flat, i)
			tFo += run(fo, i)
		}
		n++
	}
	_ = sink
	q := float64(n * block)
	b.ReportMetric(float64(tFlat.Nanoseconds())/q, "flat-ns/q")
	b.ReportMetric(float64(tFo)/float64(tFlat), "tree-failover/flat")
	b.ReportMetric(float64(tSplit)/float64(tFlat), "tree-split/flat")
}
