package rum

import (
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var sites = map[string]bool{"fra": true, "bom": true}

func parseErr(t *testing.T, body string, l Limits) *BatchError {
	t.Helper()
	l.Sites = sites
	bs, err := Parse(nil, []byte(body), netip.Addr{}, l, t0)
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Parse(%.60q) = %v, %v: want a batch error", body, bs, err)
	}
	if len(bs) != 0 {
		t.Errorf("a rejected batch returned beacons: %v", bs)
	}
	return be
}

// Every bad beacon is named by its line and counted by its reason; one
// bad beacon rejects the batch.
func TestParseRejectsByLine(t *testing.T) {
	ok := `{"client":"192.0.2.1","site":"fra","rtt_ms":20}`
	body := strings.Join([]string{
		ok,
		`{"client":"192.0.2.1","site":"sin","rtt_ms":20}`,
		``,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":0}`,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":61000}`,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":20,"time":"` + t0.Add(5*time.Minute).Format(time.RFC3339) + `"}`,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":20,"time":true}`,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":20,"time":` + "1700000000000" + `}`,
		`{"client":"not-an-address","site":"fra","rtt_ms":20}`,
		`{"client":"192.0.2.1","site":"fra","rtt_ms":"20"}`,
		`{"client":"192.0.2.1",`,
	}, "\n")
	be := parseErr(t, body, Limits{})
	want := map[int]string{2: ReasonSite, 4: ReasonRTT, 5: ReasonRTT, 6: ReasonFuture, 7: ReasonMalformed, 8: ReasonOld, 9: ReasonClient, 10: ReasonMalformed, 11: ReasonMalformed}
	if be.NBad != len(want) || be.NGood != 1 || len(be.Bad) != len(want) {
		t.Fatalf("%d bad, %d good, %d listed: want %d bad, 1 good: %v", be.NBad, be.NGood, len(be.Bad), len(want), be)
	}
	for _, b := range be.Bad {
		if want[b.Line] != b.Reason {
			t.Errorf("line %d: reason %s (%s), want %q", b.Line, b.Reason, b.Detail, want[b.Line])
		}
	}
	if strings.Contains(be.Error(), "not-an-address") {
		t.Errorf("the bad client is echoed: %v", be)
	}
}

// A compact JSON array is numbered by position; a truncated array is
// malformed; the size limits answer 413 (Oversized).
func TestParseArrayAndLimits(t *testing.T) {
	bs, err := Parse(nil, []byte(`[{"client":"2001:db8:1:2ff::9","site":"bom","rtt_ms":120.5},{"site":"fra","rtt_ms":9}]`),
		netip.MustParseAddr("198.51.100.200"), Limits{Sites: sites}, t0)
	if err != nil || len(bs) != 2 {
		t.Fatalf("array: %v %v", bs, err)
	}
	if bs[0].Client.String() != "2001:db8:1:200::/56" || bs[1].Client.String() != "198.51.100.0/24" || !bs[1].Time.Equal(t0) {
		t.Errorf("clients %v, %v (time %v): want the /56, the relay's /24, arrival time", bs[0].Client, bs[1].Client, bs[1].Time)
	}
	if be := parseErr(t, `[{"client":"192.0.2.1","site":"fra","rtt_ms":9},{"client":"192.0.2.1","site":"sin","rtt_ms":9}]`, Limits{}); be.Bad[0].Line != 2 {
		t.Errorf("array position: %v", be)
	}
	if be := parseErr(t, `[{"site":"fra","rtt_ms":9},{"site":"fr`, Limits{}); be.Bad[0].Reason != ReasonMalformed {
		t.Errorf("truncated array: %v", be)
	}
	line := `{"client":"192.0.2.1","site":"fra","rtt_ms":20}` + "\n"
	if be := parseErr(t, strings.Repeat(line, 4), Limits{MaxBeacons: 3}); !be.Oversized {
		t.Errorf("4 beacons over a limit of 3: %v", be)
	}
	if be := parseErr(t, strings.Repeat(line, 4), Limits{MaxBytes: int64(3 * len(line))}); !be.Oversized {
		t.Errorf("4 lines over a limit of 3 lines' bytes: %v", be)
	}
}

// The relay is the HTTP peer, or a trusted proxy's X-Forwarded-For: the
// rightmost hop that is not itself a trusted proxy.
func TestRelayOf(t *testing.T) {
	cdn := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	for _, c := range []struct{ peer, xff, want string }{
		{"198.51.100.7:4000", "192.0.2.1", "198.51.100.7"},                    // not a proxy: the header is ignored
		{"203.0.113.5:4000", "192.0.2.1", "192.0.2.1"},                        // the CDN says who posted
		{"203.0.113.5:4000", "10.9.9.9, 192.0.2.1, 203.0.113.8", "192.0.2.1"}, // the client's own claim (left) is not taken
		{"203.0.113.5:4000", "", "203.0.113.5"},
	} {
		r := httptest.NewRequest("POST", BeaconPath, nil)
		r.RemoteAddr = c.peer
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := relayOf(r, cdn); got.String() != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: relay %v, want %s", c.peer, c.xff, got, c.want)
		}
	}
}
