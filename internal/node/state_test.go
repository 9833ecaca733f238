package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestStateDirUnwritable: a state directory that cannot be made fails New
// with the directory named at state_dir's line (under a regular file, so
// that it fails for root too), before anything listens.
func TestStateDirUnwritable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "file", "not a directory\n")
	writeFile(t, dir, "steer.yaml", "listen: [\"127.0.0.1:0\"]\nstate_dir: file/sub\n")
	cf := filepath.Join(dir, "steer.yaml")
	_, err := New(Options{ConfigPath: cf})
	want := cf + ":2: state directory " + filepath.Join(dir, "file", "sub") + " cannot be created"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v, want %q", err, want)
	}
}

// TestStateDirDefault: a node with no state_dir keeps its state in
// steer-state beside its file: the health state of an operator's drain
// (health.json), written before the API answers, and the last good zone
// copies (zones/), without health.state_file.
func TestStateDirDefault(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	n := startNode(t, map[string]string{
		"steer.yaml": `api: { listen: "127.0.0.1:0" }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      a: { address: 192.0.2.1 }
      b: { address: 192.0.2.2 }
    rules:
      - default: { failover: [a, b] }
`,
		"example.com.zone": "$ORIGIN example.com.\n$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.53\n",
	}, Options{})
	state := filepath.Join(n.dir, "steer-state")
	if code, body := n.call("PUT", "/v1/targets/192.0.2.1/state", "", `{"state":"drain"}`); code != 204 {
		t.Fatalf("drain: %d %s", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(state, "health.json")); err != nil || !strings.Contains(string(b), "192.0.2.1") {
		t.Errorf("health.json after a drain: %v %s", err, b)
	}
	// The copies are written once the node serves, in the background.
	dnstest.WaitFor(t, 5*time.Second, "the zone's last good copy in zones/", func() bool {
		ents, err := os.ReadDir(filepath.Join(state, "zones"))
		return err == nil && len(ents) == 1
	})
	// Restarted: the drain is still there.
	n.Shutdown(t.Context())
	again := startNodeIn(t, n.dir, Options{})
	if got := again.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("after a restart: %s, want b (a drained, kept in health.json)", got)
	}
}

// TestSecondaryCopyWithoutStateFile: a secondary zone keeps its copy in
// the state directory with no health.state_file (as Knot, NSD and BIND
// keep theirs): restarted with its primary (another steer node, in
// process) gone, it answers from the copy at once, and the log has no
// warning that nothing is kept.
func TestSecondaryCopyWithoutStateFile(t *testing.T) {
	const origin = "copy.example."
	primary := startNode(t, map[string]string{
		"steer.yaml": `tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: copy.example
    file: copy.zone
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
`,
		"knot.key":  keyFile("knot-key"),
		"copy.zone": fmt.Sprintf("$ORIGIN %s\n$TTL 300\n@ SOA ns1 hostmaster 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.53\ngen TXT \"kept\"\n", origin),
	}, Options{})
	sec := startNode(t, map[string]string{
		"steer.yaml": fmt.Sprintf(`tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: copy.example
    primaries: [%s]
    tsig: knot-key
`, primary.dns),
		"knot.key": keyFile("knot-key"),
	}, Options{})
	soa := func(n *testNode) uint32 {
		r := n.query(origin, dns.TypeSOA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	dnstest.WaitFor(t, 5*time.Second, "the secondary to serve serial 7", func() bool { return soa(sec) == 7 })
	copies, err := os.ReadDir(filepath.Join(sec.dir, "steer-state", "secondary"))
	if err != nil || len(copies) == 0 {
		t.Fatalf("no copy in steer-state/secondary: %v %v", copies, err)
	}
	primary.Shutdown(t.Context())
	sec.Shutdown(t.Context())
	again := startNodeIn(t, sec.dir, Options{})
	if s := soa(again); s != 7 {
		t.Fatalf("restarted with the primary gone: serial %d, want the kept copy's 7", s)
	}
	if got := again.txt("gen." + origin); got != "kept" {
		t.Errorf("gen: %q", got)
	}
	if strings.Contains(again.logs.String()+sec.logs.String(), "keep no copy") {
		t.Error("a node with a state directory warns that secondary zones keep no copy")
	}
}

// TestFleetStateDir: a fleet node keeps its state in the state directory
// of its local file (here an explicit relative state_dir), never the
// pushed bundle's: the exported serials (which a fleet node kept nowhere
// before) and the bundle cache; restarted with the store gone, it serves
// the kept bundle with the kept serial.
func TestFleetStateDir(t *testing.T) {
	t.Parallel() // waits on timers and peers: overlaps the other such tests
	c, s := fleetStore(t)
	b := fleet.Bundle{Files: map[string][]byte{
		fleet.ConfigName: []byte(`state_dir: /nonexistent/pushed-state
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: example.com
    file: zones/example.com.zone
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
`),
		fleet.BundleName("knot.key"):               []byte(keyFile("knot-key")),
		fleet.BundleName("zones/example.com.zone"): []byte(zone("example.com", 41, "pushed")),
	}}
	if _, _, err := fleet.Publish(t.Context(), s, "/steer/v1", b, 0); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, map[string]string{"steer.yaml": fleetLocal(c.Endpoints(), "ams-1") + "state_dir: st\n"}, Options{})
	if got := n.txt("gen.example.com"); got != "pushed" {
		t.Fatalf("the node serves %q", got)
	}
	state := filepath.Join(n.dir, "st")
	dnstest.WaitFor(t, 5*time.Second, "st/xfr-serials.json with example.com", func() bool {
		b, err := os.ReadFile(filepath.Join(state, "xfr-serials.json"))
		return err == nil && strings.Contains(string(b), "example.com.")
	})
	if _, err := os.Stat(filepath.Join(state, "fleet", "bundle.json")); err != nil {
		t.Errorf("no bundle cache in the state directory: %v", err)
	}
	if _, err := os.Stat("/nonexistent/pushed-state"); err == nil {
		t.Error("the pushed bundle's state_dir was used")
	}
	if _, err := os.Stat(filepath.Join(n.dir, "steer-state")); err == nil {
		t.Error("a default state directory was made beside an explicit one")
	}
	n.Shutdown(t.Context())
	c.Member(0).Stop()
	again := startNodeIn(t, n.dir, Options{})
	if got := again.txt("gen.example.com"); got != "pushed" {
		t.Errorf("restarted with the store gone: %q, want the kept bundle's", got)
	}
	r := again.query("example.com.", dns.TypeSOA)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != 41 {
		t.Errorf("restarted: SOA %v, want serial 41", r.Answer)
	}
}

// TestLegacyStateMigrated: a file of an earlier version that sets only
// health.state_file keeps its state in that file's directory, where the
// zone and secondary copies already are (the exported serials are copied
// to their new name); with a state_dir as well, what was kept beside the
// state file is copied into it at start, replacing nothing, and the health
// state stays in the file health.state_file names.
func TestLegacyStateMigrated(t *testing.T) {
	for _, stateDir := range []string{"", "new"} {
		dir := t.TempDir()
		text := "listen: [\"127.0.0.1:0\"]\nhealth: { state_file: old/health.json }\n"
		into := "old"
		if stateDir != "" {
			text += "state_dir: " + stateDir + "\n"
			into = stateDir
		}
		writeFile(t, dir, "steer.yaml", text)
		writeFile(t, dir, "old/zones/example.com.zone", "kept zone copy\n")
		writeFile(t, dir, "old/secondary/sec.example.zone", "kept secondary copy\n")
		writeFile(t, dir, "old/steer-xfr-serials.json", `{"example.com.": {"serial": 9}}`+"\n")
		writeFile(t, dir, "new/zones/example.com.zone", "newer copy\n")
		n := startNodeIn(t, dir, Options{})
		want := map[string]string{
			"secondary/sec.example.zone": "kept secondary copy\n",
			"xfr-serials.json":           `{"example.com.": {"serial": 9}}` + "\n",
			"zones/example.com.zone":     "kept zone copy\n",
		}
		if stateDir != "" {
			want["zones/example.com.zone"] = "newer copy\n" // never replaced
		}
		for name, w := range want {
			if got, err := os.ReadFile(filepath.Join(dir, into, name)); err != nil || string(got) != w {
				t.Errorf("state_dir %q: %s/%s: %q %v, want %q", stateDir, into, name, got, err, w)
			}
		}
		n.Shutdown(t.Context())
		if _, err := os.Stat(filepath.Join(dir, "old", "health.json")); err != nil {
			t.Errorf("state_dir %q: the health state is not kept where health.state_file names it: %v", stateDir, err)
		}
		for _, d := range []string{"steer-state", "new/health.json"} {
			if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
				t.Errorf("state_dir %q: %s written", stateDir, d)
			}
		}
	}
}

// TestOperatorsZonesDirNotMigrated: zone files kept in a "zones"
// directory beside steer.yaml (where an earlier version kept its copies)
// are the operator's when the configuration reads them: nothing of that
// directory is copied into the state directory as a last good copy.
func TestOperatorsZonesDirNotMigrated(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "steer.yaml", "listen: [\"127.0.0.1:0\"]\nstate_dir: state\nzones:\n  - { origin: example.com, file: zones/example.com.zone }\n")
	writeFile(t, dir, "zones/example.com.zone", "$ORIGIN example.com.\n@ 300 IN SOA ns1 h 1 7200 3600 1209600 300\n@ 300 IN NS ns1\nns1 300 IN A 192.0.2.1\n")
	writeFile(t, dir, "zones/other.example.zone", "not a zone this configuration serves\n")
	n := startNodeIn(t, dir, Options{})
	n.Shutdown(t.Context())
	if _, err := os.Stat(filepath.Join(dir, "state", "zones", "other.example.zone")); err == nil {
		t.Error("the operator's zones directory was copied into the state directory")
	}
}

// TestStateDirChangeNeedsRestart: a reload that moves state_dir applies
// the rest and says the node keeps its state where it was until a restart.
func TestStateDirChangeNeedsRestart(t *testing.T) {
	n := startNode(t, map[string]string{"steer.yaml": "listen: [\"127.0.0.1:0\"]\n"}, Options{})
	writeFile(t, n.dir, "steer.yaml", "listen: [\"127.0.0.1:0\"]\nstate_dir: elsewhere\n")
	res, err := n.Reload(t.Context())
	old, now := filepath.Join(n.dir, "steer-state"), filepath.Join(n.dir, "elsewhere")
	if err != nil || !res.Applied || len(res.RestartNeeded) != 1 || !strings.Contains(res.RestartNeeded[0], "state_dir "+old+" -> "+now) {
		t.Fatalf("reload: %v %+v", err, res)
	}
	if _, err := os.Stat(now); err == nil {
		t.Error("the new state directory was used before a restart")
	}
}
