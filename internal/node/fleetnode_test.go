package node

import (
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestFleetNodeIdentity: the configuration a fleet node serves takes the
// node's identity (node:, defaulted from the fleet section) from the
// node's own file, never from the shared bundle, which every node gets.
func TestFleetNodeIdentity(t *testing.T) {
	for _, c := range []struct {
		local        string
		name, region string
		located      bool
	}{
		{fleetLocal([]string{"http://127.0.0.1:1"}, "fra-1"), "fra-1", "eu", false},
		{fleetLocal([]string{"http://127.0.0.1:1"}, "bom-1") + "node: { region: ap, location: { lat: 19.08, lon: 72.88 } }\n", "bom-1", "ap", true},
	} {
		local, err := config.Parse(nil, "local.yaml", []byte(c.local))
		if err != nil {
			t.Fatal(err)
		}
		b := fleet.Bundle{Rev: 7, Files: map[string][]byte{
			"steer.yaml": []byte("identity: pushed\nnode: { name: shared, region: nowhere }\necs: { unknown_client: node }\n"),
		}}
		fw := &fleetWiring{local: local, latest: b}
		cfg, _, err := fw.config(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := cfg.Node
		if n == nil || n.Name != c.name || n.Region != c.region || (n.Location != nil) != c.located {
			t.Errorf("served node %+v, want %s in %s (located %t)", n, c.name, c.region, c.located)
		}
		if cfg.Identity != "pushed" || cfg.ECS.UnknownClient != "node" {
			t.Errorf("the bundle's settings are not served: identity %q, unknown_client %q", cfg.Identity, cfg.ECS.UnknownClient)
		}
	}
}
