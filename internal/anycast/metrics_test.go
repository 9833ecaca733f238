package anycast

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestAnycastScrape(t *testing.T) {
	since := time.Now().Add(-90 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(MetricsSource{
		State: func() State {
			return State{Announced: true, Prepend: 3, Reason: "overload", Since: since,
				Transitions: map[string]uint64{"healthy": 2, "self_check_failed": 1, "overload": 1}, QPS: 1234}
		},
		Peers: func() []PeerStatus {
			return []PeerStatus{{Address: "127.0.53.1", State: "established", Since: since},
				{Address: "127.0.53.9", State: "active"}}
		},
		Prefixes:    2,
		HealthScore: func() float64 { return 0.75 },
	}))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		"steer_anycast_announced 1",
		"steer_anycast_prefixes_announced 2",
		"steer_anycast_as_path_prepend 3",
		`steer_anycast_transitions_total{reason="self_check_failed"} 1`,
		`steer_anycast_transitions_total{reason="healthy"} 2`,
		`steer_anycast_last_transition{reason="overload"} 1`,
		`steer_anycast_peer_up{peer="127.0.53.1"} 1`,
		`steer_anycast_peer_up{peer="127.0.53.9"} 0`,
		`steer_anycast_peer_session_state{peer="127.0.53.9",state="active"} 1`,
		`steer_anycast_peer_session_state{peer="127.0.53.9",state="established"} 0`,
		`steer_anycast_peer_uptime_seconds{peer="127.0.53.9"} 0`,
		"steer_anycast_last_transition_timestamp_seconds ",
		"steer_anycast_health_score 0.75",
		"steer_anycast_qps 1234",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `steer_anycast_peer_uptime_seconds{peer="127.0.53.1"} `) {
			if !strings.Contains(line, "} 9") { // about 90 seconds
				t.Errorf("uptime: %s", line)
			}
		}
	}
}
