package fleetnode

import (
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
)

// TestView: three members on one etcd see each other's statuses and each
// observer's view of a target; one that stops reaching it shows as down
// in every view. Cut from the store, a member says its health view is
// frozen, then local past view_grace, and the others see its status and
// observation go; healed, it is back on the quorum.
func TestView(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	bridge := etcdtest.NewBridge(t, c.Member(0).Addr())
	defs, keys := rigKeys(rigTarget(t), "t")
	target := targetName(keys[0])
	o := rigOptions{endpoints: c.Endpoints(), leaseTTL: "2s", viewGrace: "3s"}
	cut := o
	cut.endpoints = []string{"http://" + bridge.Addr()}
	a := startRigNode(t, cut, "a", "eu", defs, keys, true)
	b := startRigNode(t, o, "b", "eu", defs, keys, true)
	startRigNode(t, o, "c", "us", defs, keys, true)

	// observers is b's view of the target: node → "up"/"down", stale ones
	// left out, and the verdict.
	observers := func(v View) (map[string]string, string) {
		out := map[string]string{}
		for _, tv := range v.Targets {
			if tv.Target != target {
				continue
			}
			for _, o := range tv.Observers {
				if o.Stale {
					continue
				}
				out[o.Node] = "down"
				if o.Up {
					out[o.Node] = "up"
				}
			}
			return out, tv.Verdict
		}
		return out, ""
	}
	var v View
	waitFor(t, 10*time.Second, "b sees three nodes and three observers seeing the target up", func() bool {
		v = b.m.View(time.Now())
		obs, verdict := observers(v)
		return len(v.Nodes) == 3 && verdict == "up" && len(obs) == 3 && obs["a"] == "up" && obs["b"] == "up" && obs["c"] == "up"
	})
	if v.Node != "b" || v.HealthMode != ModeQuorum || len(v.Errors) != 0 {
		t.Errorf("b's view: node %s, mode %q, errors %q", v.Node, v.HealthMode, v.Errors)
	}
	for _, n := range v.Nodes {
		if n.Self != (n.Node == "b") || n.ViewAt.IsZero() || n.HealthMode != ModeQuorum || (!n.Self && n.HeardAt.IsZero()) {
			t.Errorf("b sees %+v", n)
		}
	}

	// a's probes fail: a's observation is down in b's view; the fleet's
	// verdict stays up (2 of 3 see it up).
	a.reach.Store(false)
	waitFor(t, 5*time.Second, "b sees a's observation down", func() bool {
		v = b.m.View(time.Now())
		obs, verdict := observers(v)
		return obs["a"] == "down" && obs["b"] == "up" && verdict == "up"
	})
	a.reach.Store(true)

	// a cut from the store: frozen, then local past view_grace.
	bridge.Cut()
	var frozen time.Time
	waitFor(t, 5*time.Second, "a's health view frozen", func() bool {
		mode, since := a.m.HealthMode(time.Now())
		frozen = since
		return strings.HasPrefix(mode, ModeFrozen+" since ")
	})
	waitFor(t, 5*time.Second, "a's health view local", func() bool {
		mode, since := a.m.HealthMode(time.Now())
		return strings.HasPrefix(mode, ModeLocal+" since ") && since.After(frozen)
	})
	if av := a.m.View(time.Now()); !strings.Contains(strings.Join(av.Errors, "; "), "health: local since") {
		t.Errorf("a's view while cut off says %q", av.Errors)
	}
	waitFor(t, 5*time.Second, "b no longer sees a", func() bool {
		v = b.m.View(time.Now())
		obs, _ := observers(v)
		_, seen := obs["a"]
		return len(v.Nodes) == 2 && !seen
	})
	bridge.Heal()
	bridge.Drop()
	waitFor(t, 10*time.Second, "a back on the quorum, seen by b", func() bool {
		mode, _ := a.m.HealthMode(time.Now())
		return mode == ModeQuorum && len(b.m.View(time.Now()).Nodes) == 3
	})
}
