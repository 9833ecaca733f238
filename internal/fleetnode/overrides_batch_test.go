package fleetnode

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/health"
)

// TestSetOverridesBatch: a batch is one store transaction (every key at
// one revision); set while the member is cut off it is pending on the
// member, and written in one transaction when the store answers again.
func TestSetOverridesBatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	bridge := etcdtest.NewBridge(t, c.Member(0).Addr())
	defs, keys := rigKeys(rigTarget(t), "t")
	o := rigOptions{endpoints: []string{"http://" + bridge.Addr()}, leaseTTL: "2s"}
	a := startRigNode(t, o, "a", "eu", defs, keys, true)
	s := openStore(t, c.Endpoints())
	revs := func(prefix string) map[string]int64 {
		kvs, _, err := s.Get(context.Background(), overridesPrefix("/steer/v1")+prefix)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, kv := range kvs {
			out[kv.Key] = kv.Rev
		}
		return out
	}
	oneRev := func(m map[string]int64, n int) bool {
		var r int64
		for _, v := range m {
			if r != 0 && v != r {
				return false
			}
			r = v
		}
		return len(m) == n
	}
	batch := []OverrideWrite{
		{Record: "shop.example.com.", Pool: "a", Override: health.OverrideDrain},
		{Record: "shop.example.com.", Pool: "b", Override: health.OverrideUp},
		{Target: netip.MustParseAddr("192.0.2.3"), Override: health.OverrideDown, Expires: time.Now().Add(time.Hour)},
	}
	if err := a.m.SetOverrides(batch); err != nil {
		t.Fatal(err)
	}
	if got := revs(""); !oneRev(got, 3) {
		t.Fatalf("the batch in the store: %v, want 3 keys at one revision", got)
	}

	bridge.Cut()
	batch2 := []OverrideWrite{
		{Record: "web.example.com.", Pool: "x", Override: health.OverrideDrain},
		{Record: "web.example.com.", Pool: "y", Override: health.OverrideDown},
	}
	if err := a.m.SetOverrides(batch2); !errors.Is(err, ErrPending) {
		t.Fatalf("cut off: %v, want ErrPending", err)
	}
	if p := strings.Join(a.m.Pending(), "; "); !strings.Contains(p, "web.example.com./x drain") || !strings.Contains(p, "web.example.com./y down") {
		t.Fatalf("pending: %s", p)
	}
	bridge.Heal()
	waitFor(t, 10*time.Second, "the pending batch written at one revision", func() bool {
		return oneRev(revs("pool/web.example.com."), 2)
	}, a.logs.String)
}
