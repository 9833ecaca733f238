//go:build !race

// Two fleet nodes, etcd and Knot: a wall-time and CPU-heavy scenario,
// run beside the raced packages (the agreement's own test,
// internal/fleetnode, runs under the race detector).

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/peertest"
)

// TestFleetSerialsAgree: two nodes of a fleet export the same zone, with
// Knot transferring it from both. Node a has moved the zone to serial 3
// (a pool drained and back) before node b joins with no history: b takes
// the fleet's serial 3 for the same content instead of the file's 1, and
// after a pool goes down both give the new content one serial, agreed
// through the store (one key, written once per change), which Knot
// serves with the new fallback.
func TestFleetSerialsAgree(t *testing.T) {
	c, s := fleetStore(t)
	t.Parallel()
	// The country rule against the small country database (an absolute
	// path each node opens), as xfrConfig's.
	cfg := `identity: pushed
geo: { databases: ["` + smallGeo + `"] }
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: xfr.example
    file: xfr.zone
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
records:
  - name: shop.xfr.example
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { failover: [other, de] }
`
	zoneText := "$ORIGIN xfr.example.\n$TTL 300\n@ SOA ns1 hostmaster 1 86400 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\n"
	b := fleet.Bundle{Files: map[string][]byte{"steer.yaml": []byte(cfg), "xfr.zone": []byte(zoneText), "knot.key": []byte(keyFile("knot-key"))}}
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	soa := func(n *testNode) uint32 {
		r := n.query(xfrOrigin, dns.TypeSOA)
		if len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	agreed := func() (a agreedValue) {
		kvs, _, err := s.Get(context.Background(), "/steer/v1/serials/"+xfrOrigin)
		if err != nil || len(kvs) != 1 {
			t.Fatalf("the zone's serial key: %v %v", kvs, err)
		}
		json.Unmarshal(kvs[0].Value, &a)
		a.rev = kvs[0].Rev
		return a
	}
	na := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "a")}, Options{})
	dnstest.WaitFor(t, 5*time.Second, "node a to export serial 1", func() bool { return na.xfr.Status(xfrOrigin).ExportedSerial == 1 })
	for i, state := range []string{"drain", "auto"} {
		setPoolState(t, na.Node, "shop.xfr.example", "other", state)
		want := uint32(i + 2)
		dnstest.WaitFor(t, 10*time.Second, fmt.Sprintf("node a to export serial %d", want), func() bool {
			return na.xfr.Status(xfrOrigin).ExportedSerial == want && soa(na) == want
		})
	}
	// The agreement is written through the store (at once, or when it
	// answers again after a missed keep-alive on a loaded machine).
	dnstest.WaitFor(t, 10*time.Second, "the store to hold serial 3 agreed by a", func() bool {
		a := agreed()
		return a.Serial == 3 && a.Node == "a"
	})

	nb := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "b")}, Options{})
	dnstest.WaitFor(t, 5*time.Second, "node b to export the fleet's serial 3 for the same content", func() bool {
		return nb.xfr.Status(xfrOrigin).ExportedSerial == 3 && soa(nb) == 3
	})

	dir := t.TempDir()
	knot := peertest.StartKnot(t, []peertest.Zone{{Origin: xfrOrigin, File: filepath.Join(dir, "knot.zone")}}, peertest.Options{
		Top: fmt.Sprintf(`key:
  - id: knot-key
    algorithm: hmac-sha256
    secret: %s
remote:
  - id: steer-a
    address: %s@%d
    key: knot-key
  - id: steer-b
    address: %s@%d
    key: knot-key
acl:
  - id: notify
    address: 127.0.0.1
    key: knot-key
    action: notify
`, xfrKeys["knot-key"], na.dns.Addr(), na.dns.Port(), nb.dns.Addr(), nb.dns.Port()),
		Zone: "master: [steer-a, steer-b]\nacl: notify\nzonefile-load: none\n",
	})
	dnstest.WaitFor(t, 10*time.Second, "knot to serve serial 3 and the fallback", func() bool { return serves(knot, 3, "shop."+xfrOrigin, "198.51.100.2") })

	// The pool goes down (drained through node b): both nodes give the
	// new fallback the same serial.
	before := agreed()
	setPoolState(t, nb.Node, "shop.xfr.example", "other", "down")
	for _, n := range []*testNode{na, nb} {
		dnstest.WaitFor(t, 10*time.Second, "serial 4 on both nodes", func() bool {
			return n.xfr.Status(xfrOrigin).ExportedSerial == 4 && soa(n) == 4 && n.a("shop."+xfrOrigin) == "198.51.100.1"
		})
	}
	var after agreedValue
	dnstest.WaitFor(t, 10*time.Second, "the store to hold serial 4", func() bool { after = agreed(); return after.Serial == 4 })
	if after.Sum == before.Sum {
		t.Errorf("agreed %+v after the pool went down (before %+v)", after, before)
	}
	// One key per zone, whichever node agreed.
	if kvs, _, err := s.Get(context.Background(), "/steer/v1/serials/"); err != nil || len(kvs) != 1 {
		t.Errorf("serial keys: %v %v", kvs, err)
	}
	// Knot, told of the change (as the nodes' NOTIFYs would), transfers
	// from either node and serves serial 4 with the new fallback.
	notify := new(dns.Msg)
	notify.SetNotify(xfrOrigin)
	notify.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
	if r, _, err := (&dns.Client{TsigSecret: map[string]string{"knot-key.": xfrKeys["knot-key"]}}).Exchange(notify, knot.Addr.String()); err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("NOTIFY to knot: %v %v", r, err)
	}
	dnstest.WaitFor(t, 10*time.Second, "knot to serve serial 4 with the new fallback", func() bool { return serves(knot, 4, "shop."+xfrOrigin, "198.51.100.1") })
	// Restarted, node b answers the serial it exported, kept in its
	// state directory, from its first answer.
	if err := nb.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs := na.logs.String() + nb.logs.String()
	nb = startNodeIn(t, nb.dir, Options{})
	if got := soa(nb); got != 4 {
		t.Errorf("node b restarted answers serial %d, want 4", got)
	}
	// Its fleet state (the override) arrives after the start: the same
	// content, so still serial 4, and no new agreement.
	dnstest.WaitFor(t, 5*time.Second, "the restarted node b to follow the fleet's override", func() bool {
		return nb.a("shop."+xfrOrigin) == "198.51.100.1"
	})
	na.xfr.Refresh()
	nb.xfr.Refresh()
	if a, sa, sb := agreed(), soa(na), soa(nb); a.Serial != 4 || sa != 4 || sb != 4 {
		t.Errorf("after node b's restart: agreed %d, node a %d, node b %d; want 4", a.Serial, sa, sb)
	}
	// No agreement failed, but for the store not answering in time (a
	// machine so loaded that the embedded etcd stalls past the 2-s
	// bound: the node then exports its own serial, and agrees again).
	for _, l := range strings.Split(grepLines(logs+nb.logs.String(), "cannot agree"), "\n") {
		switch {
		case l == "":
		case strings.Contains(l, "context deadline exceeded"):
			t.Logf("the store did not answer an agreement in time: %s", l)
		default:
			t.Errorf("an agreement failed: %s", l)
		}
	}
}

// agreedValue is a P/serials/ORIGIN value as the test reads it.
type agreedValue struct {
	Serial uint32 `json:"serial"`
	Sum    string `json:"sum"`
	Node   string `json:"node"`
	rev    int64
}

// TestFleetSignedSerialsAgree: two nodes of a fleet sign one zone with
// the keys pushed in the bundle, each at its own time, and export it
// signed to a secondary. Their exports differ in every RRSIG's inception
// (node b starts in a later second), yet they agree one serial for the
// same content, and each node's transfer under it validates with the
// zone's keys; a pool going down is one new serial for both, agreed once.
func TestFleetSignedSerialsAgree(t *testing.T) {
	c, s := fleetStore(t)
	t.Parallel()
	const origin = "signed.fleet.test."
	files := map[string][]byte{"knot.key": []byte(keyFile("knot-key"))}
	k, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := k.Files(time.Now())
	files["keys/"+k.BaseName()+".key"], files["keys/"+k.BaseName()+".private"] = pub, priv
	files["steer.yaml"] = []byte(fmt.Sprintf(`identity: pushed
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: %s
    file: signed.zone
    dnssec: { keys: [keys/%s] }
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
records:
  - name: shop.%s
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - default: { failover: [other, de] }
`, origin, k.BaseName(), origin))
	files["signed.zone"] = []byte("$ORIGIN " + origin + "\n$TTL 300\n@ SOA ns1 hostmaster 1 86400 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.80\n")
	if _, _, err := fleet.Publish(context.Background(), s, "/steer/v1", fleet.Bundle{Files: files}, 0); err != nil {
		t.Fatal(err)
	}
	soa := func(n *testNode) uint32 {
		r, err := n.tryQuery(origin, dns.TypeSOA)
		if err != nil || len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	agreed := func() (a agreedValue) {
		kvs, _, err := s.Get(context.Background(), "/steer/v1/serials/"+origin)
		if err == nil && len(kvs) == 1 {
			json.Unmarshal(kvs[0].Value, &a)
			a.rev = kvs[0].Rev
		}
		return a
	}
	// axfr transfers the zone from n as the secondary does and checks
	// every RRSIG in it with the zone's DNSKEY; it returns the serial
	// and the inceptions of the RRSIGs.
	axfr := func(n *testNode) (uint32, map[uint32]bool) {
		m := new(dns.Msg)
		m.SetAxfr(origin)
		m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
		tr := &dns.Transfer{TsigSecret: map[string]string{"knot-key.": xfrKeys["knot-key"]}, DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
		env, err := tr.In(m, n.dns.String())
		if err != nil {
			t.Fatal(err)
		}
		sets := map[[2]string][]dns.RR{}
		var sigs []*dns.RRSIG
		var serial uint32
		for e := range env {
			if e.Error != nil {
				t.Fatalf("AXFR from %s: %v", n.dns, e.Error)
			}
			for _, rr := range e.RR {
				switch v := rr.(type) {
				case *dns.RRSIG:
					sigs = append(sigs, v)
				case *dns.SOA:
					serial = v.Serial
					sets[[2]string{v.Hdr.Name, "SOA"}] = []dns.RR{v}
				default:
					key := [2]string{rr.Header().Name, dns.TypeToString[rr.Header().Rrtype]}
					sets[key] = append(sets[key], rr)
				}
			}
		}
		inceptions := map[uint32]bool{}
		for _, sig := range sigs {
			inceptions[sig.Inception] = true
			if err := sig.Verify(k.DNSKEY, sets[[2]string{sig.Hdr.Name, dns.TypeToString[sig.TypeCovered]}]); err != nil {
				t.Errorf("AXFR from %s: the RRSIG over %s %s does not verify: %v", n.dns, sig.Hdr.Name, dns.TypeToString[sig.TypeCovered], err)
			}
		}
		if len(sigs) < 5 {
			t.Errorf("AXFR from %s: %d RRSIGs", n.dns, len(sigs))
		}
		return serial, inceptions
	}
	na := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "a")}, Options{})
	dnstest.WaitFor(t, 5*time.Second, "node a to export its first serial", func() bool { return na.xfr.Status(origin).ExportedSerial != 0 })
	// Node b signs in a later second: its RRSIGs differ from a's.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	nb := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "b")}, Options{})
	first := agreed()
	dnstest.WaitFor(t, 5*time.Second, "both nodes to export the agreed serial", func() bool {
		first = agreed()
		return first.Serial != 0 && soa(na) == first.Serial && soa(nb) == first.Serial &&
			na.xfr.Status(origin).ExportedSerial == first.Serial && nb.xfr.Status(origin).ExportedSerial == first.Serial
	})
	sa, ia := axfr(na)
	sb, ib := axfr(nb)
	if sa != first.Serial || sb != first.Serial {
		t.Fatalf("transfers under serials %d (a) and %d (b), agreed %d", sa, sb, first.Serial)
	}
	for inc := range ib {
		if ia[inc] {
			t.Errorf("nodes a and b signed with the same inception %d: the test does not show signatures made apart", inc)
		}
	}

	// A pool goes down: one new serial, agreed once, on both nodes.
	setPoolState(t, na.Node, "shop."+strings.TrimSuffix(origin, "."), "other", "down")
	want := first.Serial + 1
	for _, n := range []*testNode{na, nb} {
		dnstest.WaitFor(t, 10*time.Second, fmt.Sprintf("serial %d on %s", want, n.dns), func() bool {
			return n.xfr.Status(origin).ExportedSerial == want && soa(n) == want && n.a("shop."+origin) == "198.51.100.1"
		})
	}
	after := agreed()
	if after.Serial != want || after.Sum == first.Sum {
		t.Errorf("agreed %+v after the pool went down (before %+v)", after, first)
	}
	na.xfr.Refresh()
	nb.xfr.Refresh()
	if again := agreed(); again.rev != after.rev || soa(na) != want || soa(nb) != want {
		t.Errorf("after refreshing both again: agreed %+v (was %+v), serials %d and %d", again, after, soa(na), soa(nb))
	}
	if sa, _ := axfr(na); sa != want {
		t.Errorf("node a transfers serial %d, want %d", sa, want)
	}
	if sb, _ := axfr(nb); sb != want {
		t.Errorf("node b transfers serial %d, want %d", sb, want)
	}
	if l := na.logs.String() + nb.logs.String(); strings.Contains(l, "cannot agree") {
		t.Errorf("an agreement failed:\n%s", grepLines(l, "agree"))
	}
}
