package anycast

import (
	"net/netip"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/birdtest"
)

// TestSpeakerWithBIRD drives the speaker in-process (so under -race)
// against a real BGP peer: the session comes up, both families are
// announced with the peer seeing AS path 64512, prepending and removing
// it replaces the routes in place, a withdrawal removes exactly our
// prefixes, and Stop closes the session.
func TestSpeakerWithBIRD(t *testing.T) {
	b := birdtest.Start(t, 64512, "")
	sp, err := StartSpeaker(SpeakerConfig{
		RouterID:  netip.MustParseAddr("198.51.100.1"),
		LocalAS:   64512,
		Prefixes:  []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:53::/48")},
		NextHopV6: netip.MustParseAddr("2001:db8:53::1"),
		Peers: []Peer{{Address: netip.MustParseAddr(birdtest.Addr), Port: b.Port, RemoteAS: birdtest.AS,
			LocalAddress: netip.MustParseAddr(birdtest.Speaker), HoldTime: 9 * time.Second, ConnectRetry: time.Second}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	wait := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 10s\npeers %+v\n%s\n%s", what, sp.Peers(), b.Dump(), b.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	routes := func(path string) func() bool {
		return func() bool {
			r := b.Routes(t)
			return len(r) == 2 && r["192.0.2.0/24"] == path && r["2001:db8:53::/48"] == path
		}
	}
	wait("session established", func() bool {
		ps := sp.Peers()
		return len(ps) == 1 && ps[0].Established() && !ps[0].Since.IsZero()
	})
	if ps := sp.Peers(); ps[0].Address != birdtest.Addr || ps[0].RemoteAS != birdtest.AS {
		t.Errorf("peer %+v", ps[0])
	}
	if r := b.Routes(t); len(r) != 0 {
		t.Fatalf("announced before Announce: %v", r)
	}
	if err := sp.Announce(0); err != nil {
		t.Fatal(err)
	}
	wait("announced", routes("64512"))
	if err := sp.Announce(2); err != nil {
		t.Fatal(err)
	}
	wait("prepended", routes("64512 64512 64512"))
	if err := sp.Announce(0); err != nil {
		t.Fatal(err)
	}
	wait("prepend removed", routes("64512"))
	if err := sp.Withdraw(); err != nil {
		t.Fatal(err)
	}
	wait("withdrawn", func() bool { return len(b.Routes(t)) == 0 })
	if err := sp.Withdraw(); err != nil {
		t.Errorf("withdrawing twice: %v", err)
	}
	if err := sp.Announce(0); err != nil {
		t.Fatal(err)
	}
	wait("re-announced", routes("64512"))
	sp.Stop()
	wait("routes gone with the session", func() bool { return len(b.Routes(t)) == 0 })
	sp.Stop() // idempotent
	if ps := sp.Peers(); len(ps) != 0 {
		t.Errorf("peers after Stop: %+v", ps)
	}
}
