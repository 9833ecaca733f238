package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestTrafficCounts queries a served node's steered record, with and
// without an ECS subnet, and reads the answers in its traffic windows;
// a reload that adds a pool and a rule keeps them.
func TestTrafficCounts(t *testing.T) {
	// The one rule is a default: the record's answers do not depend on
	// the database, so a small one (compiling the policy against the
	// embedded one was most of the test's time under -race).
	db, err := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", "larkbook-city.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(extra string) string {
		return fmt.Sprintf(`zones:
  - origin: example.com
    file: example.com.zone
geo: { databases: [%q] }
ecs: { enabled: true }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }%s
    rules:
      - default: { failover: [primary, backup] }
`, db, extra)
	}
	n := startNode(t, map[string]string{"steer.yaml": cfg(""), "example.com.zone": zone("example.com", 1, "x")}, Options{})
	ask := func(subnet string) {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		if subnet != "" {
			_, ipn, _ := net.ParseCIDR(subnet)
			bits, _ := ipn.Mask.Size()
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(bits), Address: ipn.IP.To4()})
			m.Extra = append(m.Extra, o)
		}
		for range 20 { // a loaded machine drops a UDP query now and then
			if r, err := dns.Exchange(m, n.dns.String()); err == nil {
				if len(r.Answer) != 1 {
					t.Fatalf("answer %v", r)
				}
				return
			}
		}
		t.Fatal("no answer")
	}
	for range 3 {
		ask("")
	}
	for range 2 {
		ask("198.51.100.0/24")
	}
	tr := n.Traffic()
	tr.Sample(time.Now())
	c, ok := tr.Window(5 * time.Minute).Record("shop.example.com.")
	if !ok || c.Answers != 5 || c.Pools["primary"] != 5 || c.Rules[0] != 5 {
		t.Fatalf("5 answers from primary: the window holds %+v (ok %v)", c, ok)
	}
	scoped := uint64(0)
	for _, n := range c.Scopes4 {
		scoped += n
	}
	if scoped != 2 || c.Scopes4[0] != 2 {
		t.Errorf("two ECS queries, steered by the default rule alone (scope /0): scopes %v", c.Scopes4)
	}
	writeFile(t, n.dir, "steer.yaml", cfg("\n      extra: { address: 192.0.2.3 }"))
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	ask("")
	tr.Sample(time.Now())
	c, _ = tr.Window(time.Hour).Record("shop.example.com.")
	if c.Answers != 6 || c.Pools["primary"] != 6 || len(c.Pools) != 3 {
		t.Errorf("after the reload: %+v, want 6 answers from primary, 3 pools", c)
	}
}

// TestFleetTrafficSum runs two fleet nodes serving one steered record:
// each answers its own queries, and a new bundle makes both publish at
// once, after which either node's windows hold the fleet's sum.
func TestFleetTrafficSum(t *testing.T) {
	t.Parallel() // waits on peers: overlaps the other such tests
	c, s := fleetStore(t)
	bundle := func(serial int) fleet.Bundle {
		b := fleetBundle(serial, "x")
		b.Files["steer.yaml"] = []byte(`identity: pushed
zones:
  - origin: example.com
    file: zones/example.com.zone
records:
  - name: shop.example.com
    ttl: 1
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`)
		return b
	}
	ctx := context.Background()
	rev, _, err := fleet.Publish(ctx, s, "/steer/v1", bundle(1), 0)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*testNode
	for _, name := range []string{"fra-1", "bom-1"} {
		nodes = append(nodes, startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), name)}, Options{}))
	}
	for i, n := range nodes {
		for range 2 + i { // fra-1 answers 2, bom-1 3
			if got := n.a("shop.example.com"); got != "192.0.2.1" {
				t.Fatalf("%s", got)
			}
		}
		n.Traffic().Sample(time.Now())
	}
	if _, _, err := fleet.Publish(ctx, s, "/steer/v1", bundle(2), rev); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		dnstest.WaitFor(t, 10*time.Second, "the node's windows sum both nodes' answers", func() bool {
			w := n.Traffic().Window(time.Hour)
			c, _ := w.Record("shop.example.com.")
			return w.Nodes == 2 && c.Answers == 5 && c.Pools["primary"] == 5
		})
	}
}
