package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/snapshot"
)

// write puts files (name -> contents) in a new directory and loads its
// steer.yaml.
func write(t *testing.T, files map[string]string) (*config.Config, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg, dir
}

const goodZone = `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.2
`

func has(ps diag.Problems, file string, line int, phrases ...string) bool {
next:
	for _, p := range ps {
		if p.File != file || p.Line != line {
			continue
		}
		for _, ph := range phrases {
			if !strings.Contains(p.Msg, ph) {
				continue next
			}
		}
		return true
	}
	return false
}

func problems(t *testing.T, err error) diag.Problems {
	t.Helper()
	var ps diag.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not diag.Problems: %v", err, err)
	}
	return ps
}

func TestBuild(t *testing.T) {
	cfg, dir := write(t, map[string]string{
		"steer.yaml": `listen: ["127.0.0.1:5300"]
identity: ns.test
version_bind: steer-test
tcp: { max_connections: 7, idle_timeout: 3s }
zones:
  - origin: example.com
    file: zones/example.com.zone
`,
		"zones/example.com.zone": goodZone + "www IN A 192.0.2.2\n",
	})
	snap, warns, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	zf := filepath.Join(dir, "zones", "example.com.zone")
	if len(warns) != 1 || !has(warns, zf, 7, "duplicate") {
		t.Errorf("warnings = %v, want the duplicate at %s:7", warns, zf)
	}
	if snap.Config != cfg || snap.Identity != "ns.test" || snap.Version != "steer-test" ||
		len(snap.Listen) != 1 || snap.Listen[0] != "127.0.0.1:5300" ||
		snap.TCPMaxConnections != 7 || snap.TCPIdleTimeout != 3*time.Second || snap.Loaded.IsZero() {
		t.Errorf("snapshot fields: %+v", snap)
	}
	a := snap.Zones.Lookup("www.example.com.", dns.TypeA)
	if a.Rcode != dns.RcodeSuccess || len(a.Answer) != 1 || a.Answer[0].String() != "www.example.com.\t300\tIN\tA\t192.0.2.2" {
		t.Errorf("lookup: %v %v", dns.RcodeToString[a.Rcode], a.Answer)
	}
	if s := snap.Summary(); !strings.Contains(s, "1 zones, 4 records") {
		t.Errorf("Summary() = %q", s)
	}
}

func TestBuildVersionHidden(t *testing.T) {
	cfg, _ := write(t, map[string]string{
		"steer.yaml": "zones:\n  - origin: example.com\n    file: a.zone\n",
		"a.zone":     goodZone,
	})
	snap, warns, err := snapshot.Build(cfg)
	if err != nil || len(warns) != 0 {
		t.Fatalf("err %v warns %v", err, warns)
	}
	if snap.Version != "" {
		t.Errorf("Version = %q with version_bind hidden, want empty", snap.Version)
	}
}

func TestBuildMissingZoneFile(t *testing.T) {
	cfg, dir := write(t, map[string]string{
		"steer.yaml": `# two zones, one file missing
zones:
  - origin: example.com
    file: a.zone
  - origin: example.net
    file: missing.zone
`,
		"a.zone": goodZone,
	})
	snap, _, err := snapshot.Build(cfg)
	if snap != nil || err == nil {
		t.Fatalf("Build = %v, %v; want an error", snap, err)
	}
	ps := problems(t, err)
	if len(ps) != 1 || !has(ps, cfg.File, 5, "zone example.net", filepath.Join(dir, "missing.zone")) {
		t.Errorf("problems = %v, want one at %s:5 naming the zone and its file", ps, cfg.File)
	}
}

func TestBuildReportsAllZoneErrors(t *testing.T) {
	cfg, dir := write(t, map[string]string{
		"steer.yaml": `zones:
  - origin: example.com
    file: a.zone
  - origin: example.net
    file: b.zone
  - origin: example.org
    file: c.zone
`,
		// CNAME and other data at line 7.
		"a.zone": goodZone + "www IN CNAME ns1\n",
		// No apex NS, and a record outside the zone at line 4.
		"b.zone": "$ORIGIN example.net.\n$TTL 300\n@ IN SOA ns1 h 1 2 3 4 5\nwww.example.org. IN A 192.0.2.1\n",
		// A parse error at line 3.
		"c.zone": "$ORIGIN example.org.\n@ 300 IN SOA ns1 h 1 2 3 4 5\nwww 300 IN A 300.1.1.1\n",
	})
	snap, _, err := snapshot.Build(cfg)
	if snap != nil || err == nil {
		t.Fatalf("Build = %v, %v; want an error", snap, err)
	}
	ps := problems(t, err)
	want := []struct {
		file   string
		line   int
		phrase []string
	}{
		{filepath.Join(dir, "a.zone"), 7, []string{"CNAME and other data"}},
		{filepath.Join(dir, "b.zone"), 4, []string{"outside the zone"}},
		{cfg.File, 4, []string{"zone example.net", "no NS records"}},
		{filepath.Join(dir, "c.zone"), 3, []string{"bad A"}},
	}
	for _, w := range want {
		if !has(ps, w.file, w.line, w.phrase...) {
			t.Errorf("missing %s:%d %q in:\n%v", w.file, w.line, w.phrase, ps)
		}
	}
	if len(ps) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
}
