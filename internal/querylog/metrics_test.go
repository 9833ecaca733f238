package querylog

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestCollector: the log's counts, and zeros while it is off.
func TestCollector(t *testing.T) {
	var cur *Log
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() *Log { return cur }))
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); !strings.Contains(body, `steer_query_log_entries_total{result="written"} 0`) {
		t.Errorf("off: %s", body)
	}
	cur = &Log{}
	cur.written.Store(7)
	cur.dropped.Store(3)
	body := scrape()
	for _, want := range []string{`steer_query_log_entries_total{result="written"} 7`, `steer_query_log_entries_total{result="dropped"} 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in:\n%s", want, body)
		}
	}
}
