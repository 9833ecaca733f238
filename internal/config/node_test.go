package config_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/steer-dns/steer/internal/config"
)

func TestNodeKeys(t *testing.T) {
	c := mustParse(t, `node:
  name: fra-1
  location: { lat: 50.11, lon: 8.68 }
  region: eu
  country: de
ecs:
  unknown_client: node
  anycast_resolvers: [1.1.1.0/24, "2606:4700:4700::/48", 9.9.9.9]
`)
	want := &config.Node{Name: "fra-1", Location: &config.Location{Lat: 50.11, Lon: 8.68}, Region: "eu", Country: "DE"}
	if !reflect.DeepEqual(c.Node, want) {
		t.Errorf("node %+v, want %+v", c.Node, want)
	}
	if c.ECS.UnknownClient != "node" || len(c.ECS.AnycastResolvers) != 3 {
		t.Errorf("ecs %+v", c.ECS)
	}
	if ps := c.ECS.AnycastResolverPrefixes(); len(ps) != 3 || ps[2].String() != "9.9.9.9/32" {
		t.Errorf("anycast resolver prefixes %v", ps)
	}

	// Defaults: no node section, unknown clients by the resolver.
	c = mustParse(t, "identity: x\n")
	if c.Node != nil || c.ECS.UnknownClient != config.UnknownClientResolver {
		t.Errorf("defaults: node %+v, unknown_client %q", c.Node, c.ECS.UnknownClient)
	}

	// With a fleet section, name and region are the fleet's.
	fleet := "fleet:\n  node: bom-1\n  region: ap\n  etcd: { endpoints: [https://etcd-a:2379] }\n"
	c = mustParse(t, fleet)
	if c.Node == nil || c.Node.Name != "bom-1" || c.Node.Region != "ap" || c.Node.Location != nil {
		t.Errorf("fleet defaults: node %+v", c.Node)
	}
	c = mustParse(t, fleet+"node: { location: { lat: 19.08, lon: 72.88 } }\n")
	if c.Node.Name != "bom-1" || c.Node.Region != "ap" || c.Node.Location == nil {
		t.Errorf("fleet defaults with a location: node %+v", c.Node)
	}
	c = mustParse(t, fleet+"node: { name: bom-2, region: south-asia }\n")
	if c.Node.Name != "bom-2" || c.Node.Region != "south-asia" {
		t.Errorf("node keys over fleet defaults: node %+v", c.Node)
	}
	// Without a fleet the name is the host name.
	c = mustParse(t, "node: { country: IN }\n")
	if h, _ := os.Hostname(); c.Node.Name != h {
		t.Errorf("node name %q, want the host name %q", c.Node.Name, h)
	}
}

func TestNodeProblems(t *testing.T) {
	_, ps := parse(t, `node:
  name: "fra 1"
  location: { lat: 91, lon: -181 }
  region: eu/west
  country: XX
ecs:
  unknown_client: nearest
  anycast_resolvers:
    - 1.1.1.1/24
    - not-a-prefix
    - ::ffff:1.1.1.0/120
    - 8.8.8.0/24
    - 8.8.8.0/24
`)
	checkProblems(t, ps, []prob{
		{2, `node.name: "fra 1" is not a node name`},
		{3, "node.location.lat: 91 is not a latitude"},
		{3, "node.location.lon: -181 is not a longitude"},
		{4, `node.region: "eu/west" may not hold '/'`},
		{5, `node.country: unknown country code "XX"`},
		{7, `ecs.unknown_client: "nearest" is not resolver or node`},
		{9, "1.1.1.1/24 has host bits set (did you mean 1.1.1.0/24?)"},
		{10, `"not-a-prefix" is not a CIDR prefix`},
		{11, "write IPv4 prefix ::ffff:1.1.1.0/120 as plain IPv4"},
		{13, "8.8.8.0/24 is listed twice (line 12)"},
	})
	_, ps = parse(t, "node: { name: a, bogus: 1 }\n")
	if len(ps) != 1 || ps[0].Line != 1 {
		t.Errorf("an unknown key of node: %v", ps)
	}
}
