package health

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func scrapeText(reg *prometheus.Registry) string {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestCheckMetrics: the duration histogram (inclusive bucket bounds,
// negative durations as 0), the checks by result and the transitions by
// new state.
func TestCheckMetrics(t *testing.T) {
	m := NewManager(nil)
	reg := prometheus.NewRegistry()
	if err := m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	// Fresh: every series there at 0.
	text := scrapeText(reg)
	for _, want := range []string{`steer_health_checks_total{result="fail"} 0`, `steer_health_transitions_total{to="unknown"} 0`,
		"steer_health_check_duration_seconds_count 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("fresh scrape lacks %q", want)
		}
	}
	for _, c := range []struct {
		d        time.Duration
		ok       bool
		from, to Status
	}{
		{time.Millisecond, true, Unknown, Up}, {3 * time.Millisecond, true, Down, Up}, {100 * time.Millisecond, false, Up, Down},
		{100*time.Millisecond + 100*time.Nanosecond, true, Up, Up}, {7 * time.Second, false, Down, Unknown}, {-time.Second, true, Up, Up},
	} {
		m.met.observe(c.d, c.ok, c.from, c.to)
	}
	fams := gather(t, reg)
	h := fams["steer_health_check_duration_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 6 || fmt.Sprintf("%.7f", h.GetSampleSum()) != fmt.Sprintf("%.7f", 0.001+0.003+0.1+0.1000001+7) {
		t.Errorf("histogram count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	want := []uint64{2, 3, 3, 3, 3, 4, 5, 5, 5, 5, 5}
	for i, b := range h.GetBucket() {
		if b.GetUpperBound() != checkBuckets[i] || b.GetCumulativeCount() != want[i] {
			t.Errorf("bucket %d: le %v count %d, want le %v count %d", i, b.GetUpperBound(), b.GetCumulativeCount(), checkBuckets[i], want[i])
		}
	}
	text = scrapeText(reg)
	for _, want := range []string{
		`steer_health_checks_total{result="ok"} 4`, `steer_health_checks_total{result="fail"} 2`,
		`steer_health_transitions_total{to="up"} 2`, `steer_health_transitions_total{to="down"} 1`,
		`steer_health_transitions_total{to="unknown"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q", want)
		}
	}
}

// TestTargetMetrics: targets are counted by state, and named by address
// only once target labels are on.
func TestTargetMetrics(t *testing.T) {
	t.Parallel()
	good, bad := newWebServer(t, false), newWebServer(t, false)
	bad.code.Store(500)
	m := newManager(t)
	reg := prometheus.NewRegistry()
	if err := m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	checks := map[string]Check{
		"good": {Type: "http", Port: good.port(t), Interval: iv, Timeout: to, Rise: 1, Fall: 1},
		"bad":  {Type: "http", Port: bad.port(t), Interval: iv, Timeout: to, Rise: 1, Fall: 1},
	}
	kg, kb := Key{localhost, "good"}, Key{localhost, "bad"}
	m.Apply(checks, []Key{kg, kb})
	waitStatus(t, m, kg, Up, 2*time.Second)
	waitStatus(t, m, kb, Down, 2*time.Second)
	text := scrapeText(reg)
	for _, want := range []string{`steer_health_targets{state="up"} 1`, `steer_health_targets{state="down"} 1`,
		`steer_health_targets{state="unknown"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "127.0.0.1") {
		t.Errorf("a target address is exposed without target labels:\n%s", text)
	}
	m.SetTargetLabels(true)
	text = scrapeText(reg)
	for _, want := range []string{`steer_health_target_up{address="127.0.0.1",check="good"} 1`,
		`steer_health_target_up{address="127.0.0.1",check="bad"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
}
