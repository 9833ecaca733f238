package policy

import (
	"path/filepath"
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
)

// The records of a table without CIDR matches share one pair of placed
// tries, compiled once and taken by the next build against the same
// databases; a record with CIDR matches has tries of its own.
func TestPlacedTriesShared(t *testing.T) {
	city, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	db, err := geo.Open(city)
	if err != nil {
		t.Fatal(err)
	}
	set := &geo.Set{DBs: []*geo.Database{db}}
	yaml := `node: { name: fra-1, country: DE }
ecs: { unknown_client: node }
records:
  - name: a.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { continent: EU }
        pool: x
      - default: { pool: y }
  - name: b.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { country: IN }
        pool: x
      - default: { pool: y }
  - name: c.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { country: DE, cidr: 10.0.0.0/8 }
        pool: x
      - default: { pool: y }
`
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	t1, _, err := Build(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := t1.Get("a.example.com."), t1.Get("b.example.com."), t1.Get("c.example.com.")
	if !a.nodeTwins || !b.nodeTwins || !c.nodeTwins {
		t.Fatal("no node twins")
	}
	same := func(x, y *trie) bool { return len(x.nodes) > 0 && &x.nodes[0] == &y.nodes[0] }
	if !same(&a.u4, &b.u4) || !same(&a.u6, &b.u6) || !same(&a.u4, &t1.nodeIn.placed4) {
		t.Error("records without CIDR matches do not share the placed tries")
	}
	if same(&c.u4, &a.u4) {
		t.Error("a record with a CIDR match uses the shared placed tries")
	}
	// A rebuild with another record against the same set takes them.
	cfg2, err := config.Parse(nil, "steer.yaml", []byte(yaml+`  - name: d.example.com
    pools: { x: { address: 192.0.2.1 }, y: { address: 192.0.2.2 } }
    rules:
      - match: { continent: AS }
        pool: x
      - default: { pool: y }
`))
	if err != nil {
		t.Fatal(err)
	}
	t2, _, err := BuildWith(cfg2, set, t1)
	if err != nil {
		t.Fatal(err)
	}
	if d := t2.Get("d.example.com."); !same(&d.u4, &t1.nodeIn.placed4) || !same(&t2.nodeIn.placed6, &t1.nodeIn.placed6) {
		t.Error("the next build compiled the placed tries again")
	}
}
