package metrics

import (
	"math"
	"strings"
	"testing"
	"time"

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
	m := New()
	m.SetRecords([]string{"www.example.com.", "api.example.com.", "x."},
		[][]string{{"eu"}, {"all"}, {"p"}}, []int{3, 1}) // x. has no rules
	m.Decision(0, 0)
	m.Decision(0, 2)
	m.Decision(0, 2)
	m.Decision(1, 0)
	for _, c := range [][2]int{{0, 3}, {0, -1}, {1, 1}, {2, 0}, {3, 0}, {-1, 0}} {
		m.Decision(c[0], c[1])
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
	m.SetRecords([]string{"www.example.com."}, [][]string{{"eu"}}, []int{1})
	fams = parse(t, scrape(t, m))
	checkValue(t, fams, 0, n, "record", "www.example.com.", "rule", "1")
	if got := len(fams[n].GetMetric()); got != 1 {
		t.Errorf("%d decision series after reload, want 1", got)
	}
}

func TestECSAndScope(t *testing.T) {
	m := New()
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
	text := scrape(t, New())
	fams := parse(t, text)
	checkHistogram(t, fams, "steer_dns_ecs_scope_prefix_length", []string{"family", "ipv4"},
		0, 0, []float64{0, 8, 16, 20, 24, 28, 32}, make([]uint64, 7))
	checkHistogram(t, fams, "steer_health_check_duration_seconds", nil,
		0, 0, []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, make([]uint64, 11))
	checkValue(t, fams, 0, "steer_health_transitions_total", "to", "unknown")
	checkValue(t, fams, 0, "steer_health_checks_total", "result", "fail")
	checkValue(t, fams, 0, "steer_dns_ecs_queries_total", "ecs", "absent")
	absent(t, text, "steer_health_target_up{", "steer_health_pool_up{",
		"steer_geo_database_build_timestamp_seconds{", "steer_steering_decisions_total{")
}

func TestHealthDetail(t *testing.T) {
	m := New()
	m.SetHealthDetail(func() ([]TargetState, []PoolState) {
		return []TargetState{
				{Record: "www.example.com.", Pool: "eu", Address: "192.0.2.1", Check: "http", Up: true},
				{Record: "www.example.com.", Pool: "eu", Address: "192.0.2.2", Check: "http", Up: false},
				{Record: "www.example.com.", Pool: "us", Address: "2001:db8::1", Check: "tcp", Up: true},
				// A duplicate label set is reported once (the first wins).
				{Record: "www.example.com.", Pool: "eu", Address: "192.0.2.1", Check: "http", Up: false},
			}, []PoolState{
				{Record: "www.example.com.", Pool: "eu", Up: true},
				{Record: "www.example.com.", Pool: "us", Up: false},
			}
	})
	// Le boundaries are inclusive; 0.001 s, 0.003 s, 0.1 s, 0.1000001 s, 7 s, and -1 s (as 0).
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{
		{time.Millisecond, true}, {3 * time.Millisecond, true}, {100 * time.Millisecond, false},
		{100*time.Millisecond + 100*time.Nanosecond, true}, {7 * time.Second, false}, {-time.Second, true},
	} {
		m.CheckDone(c.d, c.ok)
	}
	for _, to := range []string{"up", "up", "down", "unknown", "sideways", ""} {
		m.Transition(to)
	}

	fams := parse(t, scrape(t, m))
	const tu, pu = "steer_health_target_up", "steer_health_pool_up"
	checkValue(t, fams, 1, tu, "record", "www.example.com.", "pool", "eu", "address", "192.0.2.1", "check", "http")
	checkValue(t, fams, 0, tu, "record", "www.example.com.", "pool", "eu", "address", "192.0.2.2", "check", "http")
	checkValue(t, fams, 1, tu, "record", "www.example.com.", "pool", "us", "address", "2001:db8::1", "check", "tcp")
	if got := len(fams[tu].GetMetric()); got != 3 {
		t.Errorf("%d target series, want 3", got)
	}
	checkValue(t, fams, 1, pu, "record", "www.example.com.", "pool", "eu")
	checkValue(t, fams, 0, pu, "record", "www.example.com.", "pool", "us")

	checkHistogram(t, fams, "steer_health_check_duration_seconds", nil,
		6, 0.001+0.003+0.1+0.1000001+7,
		[]float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		[]uint64{2, 3, 3, 3, 3, 4, 5, 5, 5, 5, 5})
	checkValue(t, fams, 4, "steer_health_checks_total", "result", "ok")
	checkValue(t, fams, 2, "steer_health_checks_total", "result", "fail")
	checkValue(t, fams, 2, "steer_health_transitions_total", "to", "up")
	checkValue(t, fams, 1, "steer_health_transitions_total", "to", "down")
	checkValue(t, fams, 1, "steer_health_transitions_total", "to", "unknown")
	if got := len(fams["steer_health_transitions_total"].GetMetric()); got != 3 {
		t.Errorf("%d transition series, want 3", got)
	}

	m.SetHealthDetail(nil)
	absent(t, scrape(t, m), "steer_health_target_up{", "steer_health_pool_up{")
}

func TestGeo(t *testing.T) {
	m := New()
	built := time.Date(2024, 5, 1, 12, 0, 0, 500_000_000, time.UTC)
	m.SetGeo(func() map[string]time.Time {
		return map[string]time.Time{"GeoLite2-Country": built, "asn": {}}
	})
	fams := parse(t, scrape(t, m))
	const n = "steer_geo_database_build_timestamp_seconds"
	checkValue(t, fams, float64(built.Unix())+0.5, n, "database", "GeoLite2-Country")
	checkValue(t, fams, 0, n, "database", "asn")
	m.SetGeo(nil)
	absent(t, scrape(t, m), n+"{")
}

// TestWholeScrapeParses checks a scrape with every series populated parses.
func TestWholeScrapeParses(t *testing.T) {
	m := New()
	m.SetRecords([]string{"a."}, [][]string{{"p"}}, []int{2})
	m.Decision(0, 1)
	m.Steered(0, 0, false)
	m.ECS(ECSPresent)
	m.Scope(false, 24)
	m.CheckDone(time.Millisecond, true)
	m.Transition("up")
	m.SetHealth(func() (int, int, int) { return 1, 0, 0 })
	m.SetHealthDetail(func() ([]TargetState, []PoolState) {
		return []TargetState{{Record: "a.", Pool: "p", Address: "192.0.2.1", Check: "http", Up: true}},
			[]PoolState{{Record: "a.", Pool: "p", Up: true}}
	})
	m.SetGeo(func() map[string]time.Time { return map[string]time.Time{"country": time.Unix(1700000000, 0)} })
	fams := parse(t, scrape(t, m))
	for _, n := range []string{
		"steer_steering_decisions_total", "steer_dns_ecs_queries_total", "steer_dns_ecs_scope_prefix_length",
		"steer_health_target_up", "steer_health_pool_up", "steer_health_check_duration_seconds",
		"steer_health_checks_total", "steer_health_transitions_total", "steer_geo_database_build_timestamp_seconds",
	} {
		if fams[n] == nil {
			t.Errorf("family %s missing", n)
		}
	}
}

// TestQueryLogSeries: the query log's counts appear when set and go when
// unset.
func TestQueryLogSeries(t *testing.T) {
	m := New()
	m.SetQueryLog(func() (uint64, uint64) { return 7, 3 })
	body := scrape(t, m)
	for _, want := range []string{`steer_query_log_entries_total{result="written"} 7`, `steer_query_log_entries_total{result="dropped"} 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in:\n%s", want, body)
		}
	}
	m.SetQueryLog(nil)
	if strings.Contains(scrape(t, m), "steer_query_log_entries_total") {
		t.Error("series still there after SetQueryLog(nil)")
	}
}
