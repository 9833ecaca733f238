package geo

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestGeoMetrics(t *testing.T) {
	built := time.Date(2024, 5, 1, 12, 0, 0, 500_000_000, time.UTC)
	var set *Set
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() *Set { return set }))
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	const n = "steer_geo_database_build_timestamp_seconds"
	if strings.Contains(scrape(), n+"{") {
		t.Error("series without a geo set")
	}
	set = &Set{DBs: []*Database{{Name: "GeoLite2-Country", Built: built}, {Name: "asn"}}}
	text := scrape()
	for _, want := range []string{n + `{database="GeoLite2-Country"} 1.7145648005e+09`, n + `{database="asn"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in\n%s", want, text)
		}
	}
}
