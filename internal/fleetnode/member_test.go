package fleetnode

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

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
		tr, err := quorum.NewTracker(quorum.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		fh := &quorumHealth{m: m, cfg: quorum.Defaults(), tracker: tr, own: map[string]ownResult{},
			members: members, fresh: true, kick: make(chan struct{}, 1)}
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

// TestReloadForgetsRemovedTargets: a reload that removes a target (an
// address) or a check drops their quorum state and this node's view of
// them, though other nodes' observations of them are still in the store;
// a target kept keeps its state, and a removed one that comes back starts
// afresh (its first verdict adopted at once).
func TestReloadForgetsRemovedTargets(t *testing.T) {
	tr, err := quorum.NewTracker(quorum.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	m := &Member{log: slog.New(slog.DiscardHandler), local: &config.Config{Fleet: &config.Fleet{Node: "n0", Region: "eu"}}}
	fh := &quorumHealth{m: m, manager: health.NewManager(nil), interval: func(string) time.Duration { return time.Minute },
		cfg: quorum.Defaults(), tracker: tr, obs: map[string]map[string]quorum.Observation{}, heard: map[string]time.Time{},
		own: map[string]ownResult{}, members: map[string]string{}, published: map[string]observation{}, kick: make(chan struct{}, 1),
		refresh: time.Second}
	addr := func(b byte) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, b}) }
	kept := health.Key{Addr: addr(1), Check: "web"}
	goneTarget := health.Key{Addr: addr(2), Check: "web"}
	goneCheck := health.Key{Addr: addr(1), Check: "tcp"}
	all := []health.Key{kept, goneTarget, goneCheck}
	names := func(keys ...health.Key) []string {
		var out []string
		for _, k := range keys {
			out = append(out, targetName(k))
		}
		slices.Sort(out)
		return out
	}

	fh.mine(all)
	now := time.Now()
	for _, k := range all {
		fh.observed(k, health.Up)
		others := map[string]quorum.Observation{}
		for _, node := range []string{"n1", "n2", "n3"} {
			others[node] = quorum.Observation{Node: node, Region: "eu", Up: true, HeardAt: now, Refresh: time.Minute}
		}
		fh.obs[targetName(k)] = others // as the store has them
	}
	fh.decide()
	if got := tr.Keys(); !slices.Equal(got, names(all...)) {
		t.Fatalf("tracked %v, want %v", got, names(all...))
	}
	if r, ok := tr.Result(targetName(kept)); !ok || r.Verdict != quorum.Up || !r.Changed {
		t.Fatalf("%s: %v %s", targetName(kept), ok, r)
	}

	fh.mine([]health.Key{kept}) // the reload
	if got := tr.Keys(); !slices.Equal(got, names(kept)) {
		t.Errorf("after the reload tracked %v, want %v", got, names(kept))
	}
	fh.observed(goneTarget, health.Down) // a check that was running during the reload
	fh.mu.Lock()
	for _, k := range []health.Key{goneTarget, goneCheck} {
		_, own := fh.own[targetName(k)]
		chosen := fh.chosen[targetName(k)]
		if own || chosen {
			t.Errorf("%s removed, still held: own %t, to publish %t", targetName(k), own, chosen)
		}
	}
	fh.mu.Unlock()

	fh.decide() // the other nodes' observations of the removed targets are still in the view
	if got := tr.Keys(); !slices.Equal(got, names(kept)) {
		t.Errorf("deciding again tracked %v, want %v", got, names(kept))
	}
	if r, _ := tr.Result(targetName(kept)); r.Verdict != quorum.Up || r.Changed {
		t.Errorf("the kept target lost its state: %s (changed %t)", r, r.Changed)
	}

	fh.mine([]health.Key{kept, goneTarget}) // a reload brings it back
	fh.decide()
	if got := tr.Keys(); !slices.Equal(got, names(kept, goneTarget)) {
		t.Errorf("after it came back tracked %v, want %v", got, names(kept, goneTarget))
	}
	if r, ok := tr.Result(targetName(goneTarget)); !ok || r.Verdict != quorum.Up || !r.Changed {
		t.Errorf("the target back does not start afresh: %v %s (changed %t)", ok, r, r.Changed)
	}
}

// TestOverlayLocalKeys: the node's own file's listen, api and identity
// replace the pushed configuration's; a pushed configuration without an
// api leaves the node's own api on; an identity set nowhere is the node's
// name, and the pushed one is served where the node's file sets none.
func TestOverlayLocalKeys(t *testing.T) {
	base := fleetLocal([]string{"http://127.0.0.1:1"}, "fra-1")
	for _, c := range []struct {
		local, pushed string
		api, identity string
		listen        string
	}{
		{base + "api: { listen: \"127.0.0.1:9001\" }\nlisten: [\"127.0.0.1:5301\"]\n", "zones: []\n", "127.0.0.1:9001", "fra-1", "127.0.0.1:5301"},
		{base + "api: { listen: \"127.0.0.1:9001\" }\nidentity: pop-a\n", "api: { listen: \"127.0.0.1:9999\" }\nidentity: pushed\nlisten: [\"127.0.0.1:5399\"]\n", "127.0.0.1:9001", "pop-a", "127.0.0.1:5399"},
		{base, "api: { listen: \"127.0.0.1:9999\" }\nidentity: pushed\n", "127.0.0.1:9999", "pushed", ""},
		{base, "identity: hide\n", "", "hide", ""},
	} {
		local, err := config.Parse(nil, "local.yaml", []byte(c.local))
		if err != nil {
			t.Fatal(err)
		}
		m := &Member{local: local, latest: fleet.Bundle{Rev: 3, Files: map[string][]byte{"steer.yaml": []byte(c.pushed)}}}
		cfg, _, err := m.Config(nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.API.Listen != c.api || cfg.Identity != c.identity || (c.listen != "" && (len(cfg.Listen) != 1 || cfg.Listen[0] != c.listen)) {
			t.Errorf("local %q pushed %q: api %q identity %q listen %v; want %q %q %q", c.local, c.pushed, cfg.API.Listen, cfg.Identity, cfg.Listen, c.api, c.identity, c.listen)
		}
	}
}

// TestOverlayTransferSources: the addresses a node sends transfers and
// NOTIFYs from are its own: set in its file they replace the pushed ones,
// and the fleet's other transfer settings stay the pushed ones.
func TestOverlayTransferSources(t *testing.T) {
	local, err := config.Parse(nil, "local.yaml", []byte(fleetLocal([]string{"http://127.0.0.1:1"}, "fra-1")+
		"transfers: { transfer_source: 127.0.0.2, notify_source: 127.0.0.3 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := &Member{local: local, latest: fleet.Bundle{Rev: 3, Files: map[string][]byte{
		"steer.yaml": []byte("transfers: { transfers_in: 4, transfer_source: 127.0.0.9 }\n"),
	}}}
	cfg, _, err := m.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr := cfg.Transfers; tr.TransferSource != "127.0.0.2" || tr.NotifySource != "127.0.0.3" || tr.TransfersIn != 4 {
		t.Errorf("transfers %+v: want the node's sources 127.0.0.2 and 127.0.0.3 and the pushed transfers_in 4", tr)
	}
}

// TestBundleReadsOnlyItsFiles: a pushed configuration reads the files it
// carries from the bundle and nothing else of the node's disk through a
// relative or absolute name (a zone named /etc/passwd is not found).
func TestBundleReadsOnlyItsFiles(t *testing.T) {
	local, err := config.Parse(nil, "local.yaml", []byte(fleetLocal([]string{"http://127.0.0.1:1"}, "fra-1")))
	if err != nil {
		t.Fatal(err)
	}
	m := &Member{local: local, latest: fleet.Bundle{Rev: 3, Files: map[string][]byte{
		"steer.yaml": []byte("cookies: { secret_file: /etc/passwd }\n"),
	}}}
	cfg, _, err := m.Config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.ReadFile(cfg.FS, cfg.Resolve(cfg.Cookies.SecretFile)); err == nil {
		t.Error("a pushed configuration read /etc/passwd from the node's disk")
	}
}
