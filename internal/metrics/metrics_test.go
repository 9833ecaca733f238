package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/qtype"
)

// steered counts an answer of record from pool alone and decided a
// decision by rule alone, through Answered, the node's one call an
// answer; a pool a mask cannot hold (negative, past 63) is its last bit,
// past every record's pools.
func steered(m *Metrics, record, pool int, allDown bool) {
	bit := uint64(1) << 63
	if pool >= 0 && pool < 63 {
		bit = 1 << pool
	}
	m.Answered(record, bit, -1, allDown)
}

func decided(m *Metrics, record, rule int) { m.Answered(record, 0, rule, false) }

// newM returns Metrics in a registry of their own.
func newM() *Metrics { return New(prometheus.NewRegistry()) }

// recs describes records for SetRecords: names[i] has pools[i] and
// rules[i] rules, in zone "example.com." and policy "", each with series
// of its own when per is set.
func recs(names []string, pools [][]string, rules []int, per bool) []Record {
	out := make([]Record, len(names))
	for i, n := range names {
		out[i] = Record{Name: n, Zone: "example.com.", PerRecord: per}
		if i < len(pools) {
			out[i].Pools = pools[i]
		}
		if i < len(rules) {
			out[i].Rules = rules[i]
		}
	}
	return out
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func expect(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		found := false
		for _, got := range strings.Split(text, "\n") {
			if got == l {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("missing line %q", l)
		}
	}
}

func absent(t *testing.T, text string, substrs ...string) {
	t.Helper()
	for _, s := range substrs {
		if strings.Contains(text, s) {
			t.Errorf("unexpected %q in scrape", s)
		}
	}
}

func TestScrape(t *testing.T) {
	m := newM()
	m.Query(UDP, dns.RcodeSuccess, dns.TypeA, true, 100)
	m.Query(UDP, dns.RcodeSuccess, dns.TypeA, true, 50)
	m.Query(UDP, dns.RcodeNameError, dns.TypeAAAA, false, 30)
	m.Query(TCP, dns.RcodeBadVers, dns.TypeHTTPS, false, 20)
	m.Query(TCP, 4000, dns.TypeNAPTR, true, 10)
	m.Query(TCP, -1, dns.TypeCAA, true, 0)
	m.Dropped(UDP)
	m.Dropped(UDP)
	m.Dropped(TCP)
	m.Truncated()
	m.SetRecords(recs([]string{"www.example.com.", "api.example.com."}, [][]string{{"eu", "us"}, {"all"}}, []int{2, 1}, true))
	steered(m, 0, 1, false)
	steered(m, 0, 1, false)
	steered(m, 0, 0, true)
	steered(m, 1, 0, false)
	m.Reload(true)
	m.Reload(false)
	m.Reload(false)

	text := scrape(t, m)
	expect(t, text,
		`steer_dns_queries_total{path="fast",qtype="A",rcode="NOERROR",transport="udp"} 2`,
		`steer_dns_queries_total{path="general",qtype="AAAA",rcode="NXDOMAIN",transport="udp"} 1`,
		`steer_dns_queries_total{path="general",qtype="HTTPS",rcode="BADVERS",transport="tcp"} 1`,
		`steer_dns_queries_total{path="fast",qtype="other",rcode="other",transport="tcp"} 1`,
		`steer_dns_queries_total{path="fast",qtype="CAA",rcode="other",transport="tcp"} 1`,
		`steer_dns_response_bytes_total{transport="udp"} 180`,
		`steer_dns_response_bytes_total{transport="tcp"} 30`,
		`steer_dns_dropped_total{transport="udp"} 2`,
		`steer_dns_dropped_total{transport="tcp"} 1`,
		`steer_dns_truncated_total 1`,
		`steer_steered_answers_total{fail_open="false",pool="us",record="www.example.com."} 2`,
		`steer_steered_answers_total{fail_open="true",pool="eu",record="www.example.com."} 1`,
		`steer_steered_answers_total{fail_open="false",pool="eu",record="www.example.com."} 0`,
		`steer_steered_answers_total{fail_open="false",pool="all",record="api.example.com."} 1`,
		`steer_steered_answers_total{fail_open="true",pool="all",record="api.example.com."} 0`,
		`steer_reloads_total{result="ok"} 1`,
		`steer_reloads_total{result="rejected"} 2`,
		`steer_policy_answers_total{fail_open="false",policy="",pool="us",zone="example.com."} 2`,
		`steer_policy_answers_total{fail_open="true",policy="",pool="eu",zone="example.com."} 1`,
		`steer_policy_answers_total{fail_open="false",policy="",pool="all",zone="example.com."} 1`,
	)
	// Never-seen query series are not exposed.
	absent(t, text, `rcode="SERVFAIL"`, `qtype="MX"`)
	if !strings.Contains(text, "go_goroutines ") {
		t.Error("Go collector missing")
	}
	if !strings.Contains(text, "steer_config_last_reload_success_timestamp_seconds 1.") {
		t.Error("last reload timestamp missing or zero")
	}

	// A reload replaces the table: old counts are gone, new series start at 0.
	m.SetRecords(recs([]string{"www.example.com."}, [][]string{{"eu"}}, []int{1}, true))
	text = scrape(t, m)
	expect(t, text,
		`steer_steered_answers_total{fail_open="false",pool="eu",record="www.example.com."} 0`,
		`steer_steered_answers_total{fail_open="true",pool="eu",record="www.example.com."} 0`,
		`steer_policy_answers_total{fail_open="true",policy="",pool="eu",zone="example.com."} 0`,
	)
	absent(t, text, `pool="us"`, `api.example.com.`)
}

func TestFreshScrape(t *testing.T) {
	text := scrape(t, newM())
	expect(t, text,
		`steer_dns_dropped_total{transport="udp"} 0`,
		`steer_dns_truncated_total 0`,
		`steer_reloads_total{result="ok"} 0`,
		`steer_config_last_reload_success_timestamp_seconds 0`,
	)
	absent(t, text, "steer_dns_queries_total{", "steer_steered_answers_total{", "steer_policy_answers_total{")
}

func TestOutOfRangeIgnored(t *testing.T) {
	m := newM()
	// Before SetRecords, every index is out of range.
	steered(m, 0, 0, false)
	m.SetRecords(recs([]string{"a.", "b."}, [][]string{{"p"}}, []int{1}, true)) // b. has no pools or rules
	for _, c := range [][2]int{{-1, 0}, {2, 0}, {0, 1}, {0, -1}, {1, 0}, {1 << 40, 0}} {
		steered(m, c[0], c[1], false)
		steered(m, c[0], c[1], true)
	}
	m.Query(Transport(2), 0, dns.TypeA, true, 100)
	m.Dropped(Transport(7))
	text := scrape(t, m)
	expect(t, text,
		`steer_steered_answers_total{fail_open="false",pool="p",record="a."} 0`,
		`steer_steered_answers_total{fail_open="true",pool="p",record="a."} 0`,
		`steer_dns_response_bytes_total{transport="udp"} 0`,
		`steer_dns_response_bytes_total{transport="tcp"} 0`,
		`steer_dns_dropped_total{transport="udp"} 0`,
		`steer_dns_dropped_total{transport="tcp"} 0`,
	)
	absent(t, text, `record="b."`, "steer_dns_queries_total{")
}

func TestNoAllocs(t *testing.T) {
	m := newM()
	m.SetRecords(recs([]string{"a."}, [][]string{{"p", "q"}}, []int{2}, true))
	cases := map[string]func(){
		"Query":     func() { m.Query(UDP, 3, dns.TypeAAAA, true, 120) },
		"Answered":  func() { m.Answered(0, 0b11, 1, true) },
		"Dropped":   func() { m.Dropped(TCP) },
		"Truncated": func() { m.Truncated() },
		"ECS":       func() { m.ECS(ECSPresent) },
		"Scope":     func() { m.Scope(true, 56) },
		"Cookie":    func() { m.Cookie(2) },
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocs per run", name, n)
		}
	}
}

func TestConcurrentQueryAndSetRecords(t *testing.T) {
	m := newM()
	const workers, n = 4, 20000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				m.Query(Transport(i&1), i&31, uint16(i), i&2 == 0, i&511)
				steered(m, i%3, (i+w)%3, i&4 == 0)
				decided(m, i%3, (i+w)%3)
			}
		}()
	}
	var sw sync.WaitGroup
	sw.Add(1)
	go func() {
		defer sw.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := i%3 + 1
			names := make([]string, k)
			pools := make([][]string, k)
			rules := make([]int, k)
			for j := range k {
				names[j] = string(rune('a' + j))
				pools[j] = []string{"x", "y", "z"}[:j%3+1]
				rules[j] = j % 3
			}
			m.SetRecords(recs(names, pools, rules, true))
			if i%50 == 0 {
				_ = scrapeQuiet(m)
			}
		}
	}()
	wg.Wait()
	close(stop)
	sw.Wait()

	// Every query was counted exactly once.
	var total uint64
	for i := range m.queries {
		total += m.queries[i].Load()
	}
	if total != workers*n {
		t.Fatalf("counted %d queries, want %d", total, workers*n)
	}
}

func scrapeQuiet(m *Metrics) int {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Code
}

func BenchmarkQuery(b *testing.B) {
	m := newM()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Query(UDP, 0, dns.TypeA, true, 64+i&63)
	}
}

func BenchmarkQueryParallel(b *testing.B) {
	m := newM()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Query(UDP, 0, dns.TypeA, true, 64)
		}
	})
}

func BenchmarkAnswered(b *testing.B) {
	m := newM()
	m.SetRecords(recs([]string{"a."}, [][]string{{"p", "q"}}, []int{2}, true))
	b.ReportAllocs()
	for b.Loop() {
		m.Answered(0, 1<<1, 1, false)
	}
}

func TestQtypeIndex(t *testing.T) {
	for i, name := range qtypeNames[:qOther] {
		qt, err := qtype.Parse(name)
		if err != nil {
			t.Fatalf("unknown type %s", name)
		}
		if got := qtypeIndex(qt); got != i {
			t.Errorf("qtypeIndex(%s) = %d, want %d", name, got, i)
		}
	}
	for _, qt := range []uint16{0, dns.TypeNAPTR, dns.TypeTLSA, 255 + 1, dns.TypeAXFR, 65535} {
		if got := qtypeIndex(qt); got != qOther {
			t.Errorf("qtypeIndex(%d) = %d, want other", qt, got)
		}
	}
}

// TestAnsweredManyPools: an answer from several pools (multivalue)
// counts once in each pool's series and once as a decision; bits past
// the record's pools are ignored.
func TestAnsweredManyPools(t *testing.T) {
	m := newM()
	m.SetRecords(recs([]string{"www.example.com."}, [][]string{{"eu", "us", "ap"}}, []int{3}, true))
	m.Answered(0, 0b101|1<<9, 2, false)
	m.Answered(0, 0b101, 2, true)
	expect(t, scrape(t, m),
		`steer_steered_answers_total{fail_open="false",pool="eu",record="www.example.com."} 1`,
		`steer_steered_answers_total{fail_open="true",pool="eu",record="www.example.com."} 1`,
		`steer_steered_answers_total{fail_open="false",pool="us",record="www.example.com."} 0`,
		`steer_steered_answers_total{fail_open="false",pool="ap",record="www.example.com."} 1`,
		`steer_steered_answers_total{fail_open="true",pool="ap",record="www.example.com."} 1`,
		`steer_steering_decisions_total{record="www.example.com.",rule="3"} 2`,
		`steer_policy_decisions_total{policy="",rule="3",zone="example.com."} 2`,
	)
}
