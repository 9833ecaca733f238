package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestQueriesTotal(t *testing.T) {
	m := New()
	if n := m.QueriesTotal(); n != 0 {
		t.Fatalf("fresh: %d", n)
	}
	m.Query(UDP, dns.RcodeSuccess, dns.TypeA, true, 100)
	m.Query(TCP, dns.RcodeNameError, dns.TypeAAAA, false, 10)
	m.Query(UDP, 4000, 65000, false, 10)
	m.Dropped(UDP) // dropped packets are not answered queries
	if n := m.QueriesTotal(); n != 3 {
		t.Fatalf("QueriesTotal = %d, want 3", n)
	}
}

func TestAnycastScrape(t *testing.T) {
	m := New()
	since := time.Now().Add(-90 * time.Second)
	m.SetAnycast(func() AnycastState {
		return AnycastState{Announced: true, Prefixes: 2, Prepend: 3, Reason: "overload", Since: since,
			Transitions: map[string]uint64{"healthy": 2, "self_check_failed": 1, "overload": 1},
			Peers: []AnycastPeer{{Address: "127.0.53.1", State: "established", Since: since},
				{Address: "127.0.53.9", State: "active"}},
			HealthScore: 0.75, QPS: 1234}
	})
	text := scrape(t, m)
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
