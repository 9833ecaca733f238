package latency

import (
	"strings"
	"testing"
)

func rt(pairs ...any) []RTT {
	var out []RTT
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, RTT{Site: pairs[i].(string), Ms: pairs[i+1].(float64), Source: SourceMeasured})
	}
	return out
}

func TestHysteresisNoFlap(t *testing.T) {
	h := NewHysteresis(Options{})
	first, _ := h.Choose("net", rt("a", 100.0, "b", 101.0), nil, 1)
	if first != "a" {
		t.Fatalf("initial = %s", first)
	}
	for u := uint64(2); u <= 51; u++ {
		// Alternate which is better, always within 5%.
		r := rt("a", 104.0, "b", 100.0)
		if u%2 == 0 {
			r = rt("a", 100.0, "b", 103.0)
		}
		for range 3 { // several calls per update
			if site, why := h.Choose("net", r, nil, u); site != "a" {
				t.Fatalf("update %d: switched to %s (%s)", u, site, why)
			}
		}
	}
}

func TestHysteresisSustainedImprovement(t *testing.T) {
	for _, rounds := range []int{1, 3, 5} {
		h := NewHysteresis(Options{SwitchRounds: rounds})
		h.Choose("net", rt("a", 100.0, "b", 120.0), nil, 1)
		for u := uint64(2); ; u++ {
			// b is 25% better than a (75 <= 100*0.8); called twice per update.
			site, why := h.Choose("net", rt("a", 100.0, "b", 75.0), nil, u)
			site2, _ := h.Choose("net", rt("a", 100.0, "b", 75.0), nil, u)
			if site != site2 {
				t.Fatalf("rounds %d: second call in update %d changed %s → %s", rounds, u, site, site2)
			}
			n := int(u - 1)
			if n < rounds && site != "a" {
				t.Fatalf("rounds %d: switched after %d updates (%s)", rounds, n, why)
			}
			if n == rounds {
				if site != "b" || !strings.Contains(why, "switched") {
					t.Fatalf("rounds %d: not switched after %d updates: %s (%s)", rounds, n, site, why)
				}
				break
			}
		}
	}
}

func TestHysteresisInterrupted(t *testing.T) {
	h := NewHysteresis(Options{}) // 3 rounds, 20%
	h.Choose("net", rt("a", 100.0, "b", 120.0), nil, 1)
	h.Choose("net", rt("a", 100.0, "b", 75.0), nil, 2)
	h.Choose("net", rt("a", 100.0, "b", 75.0), nil, 3)
	h.Choose("net", rt("a", 100.0, "b", 85.0), nil, 4) // only 15% better: restart
	h.Choose("net", rt("a", 100.0, "b", 75.0), nil, 5)
	if site, why := h.Choose("net", rt("a", 100.0, "b", 75.0), nil, 6); site != "a" {
		t.Fatalf("switched after an interrupted run: %s", why)
	}
	if site, _ := h.Choose("net", rt("a", 100.0, "b", 75.0), nil, 7); site != "b" {
		t.Fatalf("no switch after 3 fresh rounds")
	}
}

func TestHysteresisUnusable(t *testing.T) {
	h := NewHysteresis(Options{})
	h.Choose("net", rt("a", 50.0, "b", 100.0, "c", 90.0), nil, 1)
	down := map[string]bool{"a": true}
	usable := func(s string) bool { return !down[s] }
	site, why := h.Choose("net", rt("a", 50.0, "b", 100.0, "c", 90.0), usable, 1)
	if site != "c" || !strings.Contains(why, "unusable") {
		t.Fatalf("current unusable: %s (%s), want c at once", site, why)
	}
	// a comes back and is better, but only after SwitchRounds.
	down = nil
	if site, _ := h.Choose("net", rt("a", 50.0, "b", 100.0, "c", 90.0), usable, 2); site != "c" {
		t.Fatalf("flapped back at once to %s", site)
	}
	// Current missing from the list counts as unusable.
	if site, _ := h.Choose("net", rt("a", 50.0, "b", 100.0), usable, 3); site != "a" {
		t.Fatalf("current absent: %s", site)
	}
	// Nothing usable.
	if site, why := h.Choose("net", rt("a", 50.0), func(string) bool { return false }, 4); site != "" {
		t.Fatalf("nothing usable: %s (%s)", site, why)
	}
	if st, ok := h.State("net"); !ok || st.Current != "a" {
		t.Fatalf("State = %+v %v", st, ok)
	}
	// Sites with no RTT never win over a measured one, nor flap among themselves.
	none := []RTT{{Site: "x", Source: SourceNone}, {Site: "y", Source: SourceNone}}
	h.Choose("n2", none, nil, 1)
	for u := uint64(2); u < 10; u++ {
		if site, _ := h.Choose("n2", none, nil, u); site != "x" {
			t.Fatalf("none-only flapped to %s", site)
		}
	}
	if h.Len() != 2 || h.Prune(5) != 1 || h.Len() != 1 {
		t.Fatalf("Prune: Len %d", h.Len())
	}
}

// When the current site's RTT comes from somewhere else (its measurement
// went stale and the estimate stands in), the network chooses afresh
// rather than waiting out the rounds; with the same basis it does not.
func TestHysteresisBasisChange(t *testing.T) {
	h := NewHysteresis(Options{})
	m := func(site string, ms float64, key string) RTT {
		return RTT{Site: site, Ms: ms, Source: SourceMeasured, Key: key}
	}
	if s, _ := h.Choose("net", []RTT{m("a", 10, "192.0.2.0/24"), m("b", 50, "IN")}, nil, 1); s != "a" {
		t.Fatalf("initial %s", s)
	}
	if s, why := h.Choose("net", []RTT{m("a", 60, "192.0.2.0/24"), m("b", 40, "IN")}, nil, 2); s != "a" {
		t.Fatalf("same basis, 33%% better once: %s (%s)", s, why)
	}
	est := RTT{Site: "a", Ms: 120, Source: SourceEstimated, Stale: true}
	s, why := h.Choose("net", []RTT{est, m("b", 40, "IN")}, nil, 2)
	if s != "b" || !strings.Contains(why, "re-chosen") {
		t.Fatalf("a's measurement went stale: %s (%s), want b re-chosen at once", s, why)
	}
	if st, _ := h.State("net"); st.Current != "b" || st.Pending != "" {
		t.Fatalf("state %+v", st)
	}
}
