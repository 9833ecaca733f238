package birdtest

import "testing"

func TestParseRoutes(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Table master4:
192.0.2.0/24         unicast [steer 2026-11-30 05:55:24.835] * (100) [AS64512i]
	via 127.0.53.2 on lo
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64512 64512 64512 64512
	BGP.next_hop: 127.0.53.2
	BGP.local_pref: 100

Table master6:
2001:db8:53::/48     unicast [steer 2026-11-30 05:55:24.835] * (100) [AS64512i]
	via 2001:db8:53::1 on lo
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64512
	BGP.next_hop: 2001:db8:53::1
`
	got := parseRoutes(out)
	if len(got) != 2 || got["192.0.2.0/24"] != "64512 64512 64512 64512" || got["2001:db8:53::/48"] != "64512" {
		t.Errorf("parseRoutes = %v", got)
	}
	if got := parseRoutes("BIRD 2.0.12 ready.\n"); len(got) != 0 {
		t.Errorf("no routes: %v", got)
	}
}
