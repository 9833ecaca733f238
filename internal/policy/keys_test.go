package policy_test

import (
	"net/netip"
	"strings"
	"testing"
)

// TestMatchCity: a city match steers by the City database's city name,
// which tells apart two cities of one subdivision (Pune and Mumbai are
// both IN-MH in the Larkbook data), with the city's network as the scope;
// explain says why; an empty name is refused.
func TestMatchCity(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB}, `
  - name: c.example.com
    pools:
      pune: { address: 192.0.2.1 }
      elsewhere: { address: 192.0.2.2 }
    rules:
      - match: { city: [Pune, "Frankfurt am Main"] }
        pool: pune
      - default: { pool: elsewhere }
`))
	r := table.Get("c.example.com.")
	for _, c := range []struct {
		client, want string
		scope        int
	}{
		{"192.0.2.5", "pune", 28},       // Pune, IN-MH
		{"192.0.2.20", "elsewhere", 28}, // Mumbai, IN-MH
		{"192.0.2.70", "pune", 28},      // Frankfurt am Main
		{"2001:db8:1::1", "pune", 48},   // Pune, IPv6
	} {
		d := r.Decide(query(r, c.client, addr(c.client).BitLen(), ""))
		if got := poolNames(r, d.Pools); got != c.want || d.Scope != c.scope {
			t.Errorf("%s: %s scope /%d, want %s /%d", c.client, got, d.Scope, c.want, c.scope)
		}
	}
	info := lookupInfo(t, "192.0.2.20")
	if info.City != "Mumbai" {
		t.Fatalf("192.0.2.20: city %q, want Mumbai", info.City)
	}
	traces := r.ExplainRules(info, netip.MustParsePrefix("192.0.2.20/32"), nil, netip.Prefix{})
	if why := strings.Join(traces[0].Why, "; "); !strings.Contains(why, "city Mumbai is not in [Pune Frankfurt am Main]") {
		t.Errorf("explain: %q", why)
	}

	_, _, err := build(t, configYAML(t, []string{cityDB}, `
  - name: c.example.com
    pools:
      x: { address: 192.0.2.1 }
    rules:
      - match: { city: "" }
        pool: x
      - default: { pool: x }
`))
	if err == nil || !strings.Contains(err.Error(), `city "" is not a city name`) {
		t.Errorf("empty city: %v", err)
	}
}
