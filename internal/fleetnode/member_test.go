package fleetnode

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/quorum"
)

func fleetLocal(endpoints []string, node string) string {
	return fmt.Sprintf("fleet:\n  node: %s\n  region: eu\n  etcd:\n    endpoints: [%s]\n    dial_timeout: 1s\n  lease_ttl: 2s\n",
		node, strings.Join(endpoints, ", "))
}

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
		m := &Member{local: local, latest: b}
		cfg, _, err := m.Config(nil)
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

// TestProbeSpreading: with a fresh view and ten live members, each target
// is probed by five of them (rendezvous hashing: every node computes the
// same choice), each node probes about half the targets, and without a
// fresh view a node probes every target itself.
func TestProbeSpreading(t *testing.T) {
	var keys []health.Key
	for i := range 200 {
		keys = append(keys, health.Key{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Check: "h"})
	}
	members := map[string]string{}
	for i := range 10 {
		members[fmt.Sprintf("n%d", i)] = []string{"eu", "us"}[i%2]
	}
	probes := map[string]int{} // target → how many nodes probe it
	for i := range 10 {
		m := &Member{local: &config.Config{Fleet: &config.Fleet{Node: fmt.Sprintf("n%d", i), Region: members[fmt.Sprintf("n%d", i)]}}}
		fh := &quorumHealth{m: m, cfg: quorum.Defaults(), own: map[string]quorum.Verdict{}, ownObs: map[string]quorum.Observation{},
			members: members, fresh: true}
		mine := fh.mine(keys)
		if len(mine) < 60 || len(mine) > 140 {
			t.Errorf("n%d probes %d of 200 targets, want about 100", i, len(mine))
		}
		for _, k := range mine {
			probes[targetName(k)]++
		}
		fh.fresh = false
		if all := fh.mine(keys); len(all) != len(keys) {
			t.Errorf("n%d without a fresh view probes %d of %d", i, len(all), len(keys))
		}
	}
	for _, k := range keys {
		if n := probes[targetName(k)]; n != 5 {
			t.Errorf("%s is probed by %d nodes, want 5", targetName(k), n)
		}
	}
}
