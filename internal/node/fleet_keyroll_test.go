//go:build !race

// Three fleet nodes on one etcd rolling a ZSK with timings of seconds: a
// wall-time heavy scenario, run beside the raced packages (the driver's
// election and compare-and-swap have their own raced test in
// internal/fleetnode).

package node

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/keyroll"
)

// keyView is what one node serves of example.com's keys: the DNSKEY
// RRset's tags and the tag of the RRSIG over www's A RRset.
type keyView struct {
	dnskey string // sorted tags
	zsk    uint16
}

func (n *testNode) keyView() (keyView, error) {
	ask := func(name string, t uint16) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetQuestion(name, t)
		m.SetEdns0(4096, true)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
		return r, err
	}
	var v keyView
	r, err := ask("example.com.", dns.TypeDNSKEY)
	if err != nil {
		return v, err
	}
	var tags []string
	for _, rr := range r.Answer {
		if k, ok := rr.(*dns.DNSKEY); ok {
			tags = append(tags, fmt.Sprint(k.KeyTag()))
		}
	}
	slices.Sort(tags)
	v.dnskey = strings.Join(tags, ",")
	if r, err = ask("www.example.com.", dns.TypeA); err != nil {
		return v, err
	}
	for _, rr := range r.Answer {
		if s, ok := rr.(*dns.RRSIG); ok {
			v.zsk = s.KeyTag
		}
	}
	return v, nil
}

// TestFleetZSKRollover: three nodes follow one key plan through the
// store. The zone's ZSK rolls every 15 s (DNSKEY TTL, maximum TTL and
// propagation delay of 1 s): one node drives and generates the one
// successor; at every sample the three nodes publish the same DNSKEY
// RRset and sign www with the same ZSK (but within a moment of a key
// event, while each rebuilds); the driver stopped in the middle of the
// rollover hands over to another node, which finishes it and makes the
// next successor, once.
func TestFleetZSKRollover(t *testing.T) {
	c, s := fleetStore(t)
	t.Parallel()
	now := time.Now()
	files := map[string][]byte{}
	var bases []string
	for _, sep := range []bool{true, false} {
		k, err := dnssec.GenerateKey("example.com", dns.ECDSAP256SHA256, sep)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv := k.Files(now)
		files["keys/"+k.BaseName()+".key"], files["keys/"+k.BaseName()+".private"] = pub, priv
		bases = append(bases, "keys/"+k.BaseName())
	}
	files["steer.yaml"] = []byte(fmt.Sprintf(`identity: pushed
zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [%s]
      zsk_lifetime: 15s
      dnskey_ttl: 1s
      max_zone_ttl: 1s
      propagation_delay: 1s
`, strings.Join(bases, ", ")))
	files["example.com.zone"] = []byte("$ORIGIN example.com.\n$TTL 1\n@ SOA ns1 hostmaster 1 7200 3600 1209600 1\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.80\n")
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", fleet.Bundle{Files: files}, 0); err != nil {
		t.Fatal(err)
	}
	nodes, all := map[string]*testNode{}, map[string]*testNode{}
	for _, name := range []string{"a", "b", "c"} {
		// A plain etcd: the generated keys go to it as the nodes allow.
		nodes[name] = startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), name) + "  allow_insecure_keys: true\n"}, Options{})
		all[name] = nodes[name]
	}
	plan := func() (*keyroll.Plan, int64) {
		kvs, _, err := s.Get(context.Background(), "/steer/v1/dnssec/example.com.")
		if err != nil || len(kvs) != 1 {
			return nil, 0
		}
		p, err := keyroll.Decode("store", kvs[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return p, kvs[0].Rev
	}
	leader := func() string {
		kvs, _, _ := s.Get(context.Background(), "/steer/v1/dnssec/leader")
		if len(kvs) != 1 {
			return ""
		}
		return string(kvs[0].Value)
	}
	var p *keyroll.Plan
	dnstest.WaitFor(t, 10*time.Second, "the driver to store a plan with the ZSK's successor", func() bool {
		p, _ = plan()
		return p != nil && len(p.Keys) == 3
	})
	first := leader()
	var succ, old *keyroll.Key
	for _, k := range p.Keys {
		switch {
		case k.Role == keyroll.RoleZSK && k.Source == keyroll.SourceGenerated:
			succ = k
		case k.Role == keyroll.RoleZSK:
			old = k
		}
	}
	if succ == nil || old == nil || first == "" {
		t.Fatalf("plan %+v, driver %q", p, first)
	}
	t.Logf("driver %s; successor %d published %s, active %s; old %d removed %s", first, succ.Tag,
		succ.Publish.Format("15:04:05.000"), succ.Active.Format("15:04:05.000"), old.Tag, old.Remove.Format("15:04:05.000"))
	events := []time.Time{succ.Publish, succ.Active, old.Remove}
	nearEvent := func(at time.Time) bool {
		for _, e := range events {
			if d := at.Sub(e); d > -300*time.Millisecond && d < 1500*time.Millisecond {
				return true
			}
		}
		return false
	}
	// Sample every node every 200 ms until the old ZSK is gone; stop
	// the driver once the successor is published, before it signs (when
	// it signs, the driver makes the next successor).
	stopped := ""
	samples, mismatched, errs := 0, 0, 0
	seenZSK := map[uint16]bool{}
	for time.Now().Before(old.Remove.Add(1500 * time.Millisecond)) {
		if stopped == "" && time.Now().After(succ.Publish.Add(500*time.Millisecond)) {
			stopped = first
			if err := nodes[first].Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			delete(nodes, first)
			t.Logf("stopped the driver %s mid-rollover", first)
		}
		at := time.Now()
		views := map[string]keyView{}
		failed := false
		for name, n := range nodes {
			v, err := n.keyView()
			if err != nil {
				// A loaded machine leaves a query unanswered now and
				// then: the sample is skipped, not the test.
				t.Logf("node %s at %s: %v", name, at.Format("15:04:05.000"), err)
				failed = true
				break
			}
			views[name] = v
			seenZSK[v.zsk] = true
		}
		if failed {
			if errs++; errs > 10 {
				t.Fatal("too many queries unanswered")
			}
			continue
		}
		samples++
		var ref keyView
		same := true
		for _, v := range views {
			if ref == (keyView{}) {
				ref = v
			}
			same = same && v == ref
		}
		if !same {
			mismatched++
			if !nearEvent(at) {
				t.Errorf("at %s, away from any key event, the nodes serve different keys: %+v", at.Format("15:04:05.000"), views)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d samples, %d with nodes apart (all within a moment of a key event)", samples, mismatched)
	if !seenZSK[old.Tag] || !seenZSK[succ.Tag] {
		t.Errorf("ZSKs seen signing: %v, want the old %d and the successor %d", seenZSK, old.Tag, succ.Tag)
	}
	dnstest.WaitFor(t, 5*time.Second, "another node to drive", func() bool { l := leader(); return l != "" && l != first })
	next := leader()
	// The new driver finished the rollover and made the next successor
	// when the first signed: one, generated once across the fleet.
	dnstest.WaitFor(t, 5*time.Second, "the next successor in the store", func() bool {
		p, _ = plan()
		n := 0
		for _, k := range p.Keys {
			if k.Role == keyroll.RoleZSK && !k.Removed(time.Now()) {
				n++
			}
		}
		return n == 2
	})
	generated := 0
	for name, n := range all {
		c := strings.Count(n.logs.String(), "event=generate")
		t.Logf("node %s generated %d keys", name, c)
		if name != first {
			generated += c
		}
	}
	t.Logf("driver after the stop: %s", next)
	for _, n := range nodes {
		v, err := n.keyView()
		if err != nil || v.zsk != succ.Tag {
			t.Errorf("after the rollover a node signs with %d (%v), want %d", v.zsk, err, succ.Tag)
		}
	}
	// Each node keeps the fleet's plan, 0600, in its state directory:
	// what it serves from after a restart until the store answers.
	p, _ = plan()
	want, _ := p.Encode()
	for name, n := range nodes {
		f := keyroll.File(n.stateDir, "example.com.")
		fi, err := os.Stat(f)
		got, _ := os.ReadFile(f)
		if err != nil || fi.Mode().Perm() != 0o600 || string(got) != string(want) {
			t.Errorf("node %s's copy of the plan: %v, mode %v, same as the store's: %v", name, err, fi.Mode(), string(got) == string(want))
		}
	}
	if generated != 1 || strings.Count(all[first].logs.String(), "event=generate") != 1 {
		t.Errorf("the surviving nodes generated %d successors, want 1 (the new driver's), the first driver 1", generated)
	}
}
