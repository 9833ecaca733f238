package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/snapshot"
)

// TestPushBundle: the bundle steer fleet push builds carries every zone
// file, what the zones $INCLUDE (relative and absolute names, nested) and
// the TSIG key files, under the names a node resolves them to, so that the
// configuration loaded from the bundle alone builds, with its keys; a file
// outside the configuration's directory, included or named, and a
// node-local file named by a relative path, are refused with file:line.
func TestPushBundle(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "zones/example.com.zone", zone("example.com", 5, "top")+"$INCLUDE inc/www.zone\n$INCLUDE "+filepath.Join(dir, "shared", "mail.zone")+"\n")
	writeFile(t, dir, "zones/inc/www.zone", "www A 192.0.2.80\n$INCLUDE deeper.zone\n")
	writeFile(t, dir, "zones/inc/deeper.zone", "deep TXT \"nested\"\n")
	writeFile(t, dir, "shared/mail.zone", "mail A 192.0.2.25\n")
	writeFile(t, dir, "keys/xfr.key", keyFile("nsd-key"))
	writeFile(t, dir, "steer.yaml", `state_dir: /var/lib/steer
tsig:
  nsd-key: { secret_file: keys/xfr.key }
zones:
  - origin: example.com
    file: zones/example.com.zone
    secondaries: [ { address: 127.0.0.1, tsig: nsd-key, notify: none } ]
`)
	b, warns, err := PushBundle(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "steer.yaml:1: warning: state_dir is ignored by the nodes of a fleet") {
		t.Errorf("warnings: %q", warns)
	}
	var names []string
	for n := range b.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	absMail := fleet.BundleName(filepath.Join(dir, "shared", "mail.zone"))
	want := []string{"keys/xfr.key", absMail, "steer.yaml", "zones/example.com.zone", "zones/inc/deeper.zone", "zones/inc/www.zone"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("bundle files %q, want %q", names, want)
	}
	// What a node does with it: the configuration from the bundle alone.
	cfg, err := config.LoadFS(b.FS(nil), fleet.ConfigName)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatalf("the pushed configuration does not build from its bundle: %v", err)
	}
	if len(snap.Degraded) > 0 {
		t.Fatalf("degraded: %+v", snap.Degraded)
	}
	if k, ok := snap.TSIG["nsd-key"]; !ok || k.Name != "nsd-key." {
		t.Errorf("TSIG keys from the bundle: %+v", snap.TSIG)
	}
	z := snap.Zones.Find("deep.example.com.")
	if z == nil {
		t.Fatal("no zone")
	}
	for _, name := range []string{"www.example.com.", "deep.example.com.", "mail.example.com."} {
		if !zoneHas(z.AppendRecords(nil), name) {
			t.Errorf("%s (included) is not served from the bundle", name)
		}
	}

	// Refused: an include and a key outside the directory, a relative
	// geo database.
	out := t.TempDir()
	writeFile(t, out, "outside.zone", "out A 192.0.2.1\n")
	writeFile(t, out, "xfr.key", keyFile("nsd-key"))
	writeFile(t, dir, "zones/example.com.zone", zone("example.com", 6, "top")+"$INCLUDE ../../"+filepath.Base(out)+"/outside.zone\n")
	os.Rename(filepath.Join(out, "outside.zone"), filepath.Join(filepath.Dir(dir), filepath.Base(out), "outside.zone"))
	writeFile(t, dir, "steer.yaml", `geo: { databases: [city.mmdb] }
tsig:
  nsd-key: { secret_file: `+filepath.Join(out, "xfr.key")+` }
zones:
  - origin: example.com
    file: zones/example.com.zone
`)
	_, _, err = PushBundle(filepath.Join(dir, "steer.yaml"))
	for _, w := range []string{
		filepath.Join(dir, "steer.yaml") + `:1: geo.databases[0]: "city.mmdb" is relative`,
		filepath.Join(dir, "steer.yaml") + ":3: tsig.nsd-key.secret_file:",
		filepath.Join(dir, "zones/example.com.zone") + ":7: $INCLUDE ../../",
		"is outside the configuration's directory",
		"nothing was pushed",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
	// A node's own file is not a fleet configuration.
	writeFile(t, dir, "node.yaml", fleetLocal([]string{"http://127.0.0.1:1"}, "n1"))
	if _, _, err := PushBundle(filepath.Join(dir, "node.yaml")); err == nil || !strings.Contains(err.Error(), "node.yaml:1: this is a fleet node's file") {
		t.Errorf("pushing a node's file: %v", err)
	}
}

func zoneHas(rrs []dns.RR, name string) bool {
	for _, rr := range rrs {
		if rr.Header().Name == name {
			return true
		}
	}
	return false
}

// TestPushBundleDNSSEC: the bundle carries a signed zone's key pairs
// (not parsed for $INCLUDE as zone files are), and the configuration
// loaded from the bundle alone reads them.
func TestPushBundleDNSSEC(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "zones/example.com.zone", zone("example.com", 5, "top"))
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := dnssec.GenerateKey("example.com", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	base, err := dnssec.WriteKey(filepath.Join(dir, "keys"), k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rel := "keys/" + filepath.Base(base)
	writeFile(t, dir, "steer.yaml", `zones:
  - origin: example.com
    file: zones/example.com.zone
    dnssec: { keys: [`+rel+`] }
`)
	b, _, err := PushBundle(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{rel + ".key", rel + ".private"} {
		if _, ok := b.Files[n]; !ok {
			t.Errorf("bundle has no %s", n)
		}
	}
	cfg, err := config.LoadFS(b.FS(nil), fleet.ConfigName)
	if err != nil {
		t.Fatal(err)
	}
	keys, probs := cfg.ZoneKeys(0)
	if len(probs) > 0 || len(keys) != 1 || keys[0].Tag != k.Tag {
		t.Fatalf("keys from the bundle: %v %v", keys, probs)
	}
	if _, _, err := snapshot.Build(cfg); err != nil {
		t.Fatalf("the pushed configuration does not build from its bundle: %v", err)
	}
}
