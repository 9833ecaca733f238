package metrics

import (
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse parses a scrape with the Prometheus text parser, failing the test if
// it does not parse.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	return fams
}

// find returns the metric of family name whose labels are exactly labels
// (name=value pairs), or nil.
func find(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		want := map[string]string{}
		for i := 0; i < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
		ok := true
		for _, l := range m.GetLabel() {
			if v, found := want[l.GetName()]; !found || v != l.GetValue() {
				ok = false
				break
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// value returns the counter or gauge value of one series, failing if absent.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := find(fams, name, labels...)
	if m == nil {
		t.Fatalf("missing series %s%v", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("%s%v is neither counter nor gauge", name, labels)
	return 0
}

func checkValue(t *testing.T, fams map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
	t.Helper()
	if got := value(t, fams, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// checkHistogram checks a histogram's count, sum and cumulative buckets
// (upper bound → cumulative count, in order, all of them but +Inf, which
// must equal the count).
func checkHistogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels []string,
	count uint64, sum float64, bounds []float64, cum []uint64) {
	t.Helper()
	m := find(fams, name, labels...)
	if m == nil || m.Histogram == nil {
		t.Fatalf("missing histogram %s%v", name, labels)
	}
	h := m.GetHistogram()
	if h.GetSampleCount() != count {
		t.Errorf("%s%v count = %d, want %d", name, labels, h.GetSampleCount(), count)
	}
	if math.Abs(h.GetSampleSum()-sum) > 1e-9 {
		t.Errorf("%s%v sum = %v, want %v", name, labels, h.GetSampleSum(), sum)
	}
	b := h.GetBucket()
	// The text format ends with the +Inf bucket, which must equal the count.
	if n := len(b); n == 0 || !math.IsInf(b[n-1].GetUpperBound(), 1) || b[n-1].GetCumulativeCount() != count {
		t.Errorf("%s%v lacks a +Inf bucket equal to the count %d", name, labels, count)
	} else {
		b = b[:n-1]
	}
	if len(b) != len(bounds) {
		t.Fatalf("%s%v has %d buckets, want %d", name, labels, len(b), len(bounds))
	}
	var prev uint64
	for i := range b {
		if b[i].GetUpperBound() != bounds[i] || b[i].GetCumulativeCount() != cum[i] {
			t.Errorf("%s%v bucket %d = le %v: %d, want le %v: %d", name, labels, i,
				b[i].GetUpperBound(), b[i].GetCumulativeCount(), bounds[i], cum[i])
		}
		if b[i].GetCumulativeCount() < prev {
			t.Errorf("%s%v buckets not cumulative at le %v", name, labels, b[i].GetUpperBound())
		}
		prev = b[i].GetCumulativeCount()
	}
	if prev > count {
		t.Errorf("%s%v last bucket %d exceeds count %d", name, labels, prev, count)
	}
}

func TestDecisions(t *testing.T) {
	m := newM()
	m.SetRecords(recs([]string{"www.example.com.", "api.example.com.", "x."}, [][]string{{"eu"}, {"all"}, {"p"}}, []int{3, 1}, true)) // x. has no rules
	decided(m, 0, 0)
	decided(m, 0, 2)
	decided(m, 0, 2)
	decided(m, 1, 0)
	for _, c := range [][2]int{{0, 3}, {0, -1}, {1, 1}, {2, 0}, {3, 0}, {-1, 0}} {
		decided(m, c[0], c[1])
	}
	text := scrape(t, m)
	fams := parse(t, text)
	const n = "steer_steering_decisions_total"
	checkValue(t, fams, 1, n, "record", "www.example.com.", "rule", "1")
	checkValue(t, fams, 0, n, "record", "www.example.com.", "rule", "2")
	checkValue(t, fams, 2, n, "record", "www.example.com.", "rule", "3")
	checkValue(t, fams, 1, n, "record", "api.example.com.", "rule", "1")
	if got := len(fams[n].GetMetric()); got != 4 {
		t.Errorf("%d decision series, want 4", got)
	}
	absent(t, text, `rule="0"`, `rule="4"`, `record="x.",rule`)

	// A reload replaces the decision counters too.
	m.SetRecords(recs([]string{"www.example.com."}, [][]string{{"eu"}}, []int{1}, true))
	fams = parse(t, scrape(t, m))
	checkValue(t, fams, 0, n, "record", "www.example.com.", "rule", "1")
	if got := len(fams[n].GetMetric()); got != 1 {
		t.Errorf("%d decision series after reload, want 1", got)
	}
}

func TestECSAndScope(t *testing.T) {
	m := newM()
	m.ECS(ECSAbsent)
	m.ECS(ECSPresent)
	m.ECS(ECSPresent)
	m.ECS(ECSInvalid)
	m.ECS(ECSKind(9))
	// IPv4: 0, 8, 17, 24, 24, 32; 33 and -1 ignored.
	for _, s := range []int{0, 8, 17, 24, 24, 32, 33, -1} {
		m.Scope(false, s)
	}
	// IPv6: 0, 48, 56, 64, 100, 128; 129 ignored.
	for _, s := range []int{0, 48, 56, 64, 100, 128, 129} {
		m.Scope(true, s)
	}
	fams := parse(t, scrape(t, m))
	checkValue(t, fams, 1, "steer_dns_ecs_queries_total", "ecs", "absent")
	checkValue(t, fams, 2, "steer_dns_ecs_queries_total", "ecs", "present")
	checkValue(t, fams, 1, "steer_dns_ecs_queries_total", "ecs", "invalid")
	if got := fams["steer_dns_ecs_scope_prefix_length"].GetType(); got != dto.MetricType_HISTOGRAM {
		t.Errorf("scope type %v, want histogram", got)
	}
	checkHistogram(t, fams, "steer_dns_ecs_scope_prefix_length", []string{"family", "ipv4"},
		6, 0+8+17+24+24+32,
		[]float64{0, 8, 16, 20, 24, 28, 32},
		[]uint64{1, 2, 2, 3, 5, 5, 6})
	checkHistogram(t, fams, "steer_dns_ecs_scope_prefix_length", []string{"family", "ipv6"},
		6, 0+48+56+64+100+128,
		[]float64{0, 16, 32, 40, 48, 56, 64, 128},
		[]uint64{1, 1, 1, 1, 2, 3, 4, 6})
}

func TestFreshHistograms(t *testing.T) {
	text := scrape(t, newM())
	fams := parse(t, text)
	checkHistogram(t, fams, "steer_dns_ecs_scope_prefix_length", []string{"family", "ipv4"},
		0, 0, []float64{0, 8, 16, 20, 24, 28, 32}, make([]uint64, 7))
	checkValue(t, fams, 0, "steer_dns_ecs_queries_total", "ecs", "absent")
	absent(t, text, "steer_steering_decisions_total{", "steer_policy_decisions_total{")
}

// TestWholeScrapeParses checks a scrape with every series populated parses.
func TestWholeScrapeParses(t *testing.T) {
	m := newM()
	m.SetRecords(recs([]string{"a."}, [][]string{{"p"}}, []int{2}, true))
	decided(m, 0, 1)
	steered(m, 0, 0, false)
	m.ECS(ECSPresent)
	m.Scope(false, 24)
	m.Cookie(1)
	m.NoCookieUDP(40, 80)
	fams := parse(t, scrape(t, m))
	for _, n := range []string{
		"steer_steering_decisions_total", "steer_dns_ecs_queries_total", "steer_dns_ecs_scope_prefix_length",
		"steer_steered_answers_total", "steer_policy_answers_total", "steer_policy_decisions_total",
		"steer_dns_cookies_total", "steer_dns_nocookie_udp_bytes_total",
	} {
		if fams[n] == nil {
			t.Errorf("family %s missing", n)
		}
	}
}
