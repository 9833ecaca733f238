package fleetnode

import (
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestSerialsAgree: nodes agreeing the serial of one zone's export
// through the store. Many nodes agreeing one new content at once all get
// one serial (the compare-and-swap has one winner; the others read it);
// a new content gets the next serial; content seen before but not the
// latest still gets a newer one (a serial never goes back); a node whose
// own serial is ahead moves the fleet up to it; zones are apart.
func TestSerialsAgree(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	store, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: c.Endpoints(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	node := func(name string) *Serials {
		m := &Member{store: store, prefix: "/steer/v1", local: &config.Config{Fleet: &config.Fleet{Node: name}}}
		return m.AgreeSerials(nil)
	}
	const origin = "a.example."
	nodes := []*Serials{node("n1"), node("n2"), node("n3"), node("n4")}
	agree := func(s *Serials, sum string, proposed uint32) uint32 {
		t.Helper()
		v, err := s.Agree(origin, sum, proposed)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := agree(nodes[0], "D0", 1); v != 1 {
		t.Fatalf("first agreement: %d, want the proposed 1", v)
	}
	got := make([]uint32, len(nodes))
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Go(func() { got[i] = agree(s, "D1", 2) })
	}
	wg.Wait()
	for i, v := range got {
		if v != 2 {
			t.Errorf("node %d agreed %d for the new content, want 2 on every node (%v)", i, v, got)
		}
	}
	if v := agree(nodes[1], "D0", 2); v != 3 {
		t.Errorf("back to the earlier content: %d, want 3", v)
	}
	if v := agree(nodes[2], "D0", 2); v != 3 {
		t.Errorf("the same content again: %d, want the fleet's 3", v)
	}
	if v := agree(nodes[3], "D0", 9); v != 9 {
		t.Errorf("a node ahead: %d, want its own 9", v)
	}
	if s, sum, ok := nodes[3].Agreed(origin); !ok || s != 9 || sum != "D0" {
		t.Errorf("agreed as seen: %d %q %v", s, sum, ok)
	}
	if v := agree(nodes[0], "D2", 4); v != 10 {
		t.Errorf("a new content after 9: %d, want 10", v)
	}
	if v, err := nodes[0].Agree("a.example.b.", "D0", 5); err != nil || v != 5 {
		t.Errorf("another zone: %d %v, want its own 5", v, err)
	}
}
