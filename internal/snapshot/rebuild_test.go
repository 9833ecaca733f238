package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/snapshot"
)

// rebuildConfig is n steered records in example.com, each with a pool for
// Germany (where the test database puts the client) and another; record
// i's German address is 10.1.(i/250).(i%250+1).
func rebuildConfig(n int) string {
	var b strings.Builder
	b.WriteString(`geo:
  databases: [geo.mmdb]
zones:
  - origin: example.com
    file: com.zone
health_checks:
  web: { type: tcp, port: 80 }
policies:
  geo:
    rules:
      - match: { country: DE }
        pool: de
      - default: { pool: other }
records:
`)
	for i := range n {
		fmt.Fprintf(&b, "  - { name: s%d.example.com, policy: geo, pools: { de: { address: 10.1.%d.%d, health_check: web }, other: { address: 10.2.0.1 } } }\n", i, i/250, i%250+1)
	}
	return b.String()
}

func rebuildNext(t *testing.T, dir string, prev *snapshot.Snapshot) *snapshot.Snapshot {
	t.Helper()
	s, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A reload that changes one record of many builds that one, takes the
// others from the table being served, keeps the zone, and answers with
// the change; each kind of change takes effect.
func TestRebuildOneRecord(t *testing.T) {
	text := rebuildConfig(200)
	_, dir := write(t, map[string]string{"steer.yaml": text, "com.zone": comZone})
	writeGeo(t, filepath.Join(dir, "geo.mmdb"), "DE")
	path := filepath.Join(dir, "steer.yaml")
	first := rebuildNext(t, dir, nil)
	edit := func(old, new string) {
		t.Helper()
		if !strings.Contains(text, old) {
			t.Fatalf("no %q", old)
		}
		text = strings.Replace(text, old, new, 1)
		writeFile(t, path, text)
	}

	edit("address: 10.1.0.8,", "address: 10.9.9.9,")
	second := rebuildNext(t, dir, first)
	if p := second.Policies; p.RecordsReused != 199 || p.RecordsBuilt != 1 || p.Compiled != 0 || second.ZonesReused != 1 {
		t.Fatalf("reused %d records, built %d, compiled %d, kept %d zones; want 199, 1, 0, 1", p.RecordsReused, p.RecordsBuilt, p.Compiled, second.ZonesReused)
	}
	expectAnswer(t, second, "s7.example.com.", 1, "NOERROR", "A 10.9.9.9")
	expectAnswer(t, second, "s8.example.com.", 1, "NOERROR", "A 10.1.0.9")
	expectAnswer(t, first, "s7.example.com.", 1, "NOERROR", "A 10.1.0.8")
	if !containsKey(second.HealthKeys(), "10.9.9.9", "web") || containsKey(second.HealthKeys(), "10.1.0.8", "web") {
		t.Fatal("the health keys do not follow the new address")
	}

	// The policy's rules: every record using it.
	edit("      - match: { country: DE }\n        pool: de\n", "      - match: { country: FR }\n        pool: de\n")
	third := rebuildNext(t, dir, second)
	if third.Policies.RecordsBuilt != 200 {
		t.Fatalf("after a policy change %d records were built, want 200", third.Policies.RecordsBuilt)
	}
	expectAnswer(t, third, "s8.example.com.", 1, "NOERROR", "A 10.2.0.1")

	// A health check definition: the snapshot's checks are the new ones.
	edit("port: 80", "port: 8080")
	fourth := rebuildNext(t, dir, third)
	if c := fourth.HealthChecks["web"]; c.Port != 8080 {
		t.Fatalf("health check web has port %d after the edit", c.Port)
	}
	if fourth.Policies.Get("s8.example.com.").Pools[0].Check != "web" {
		t.Fatal("the pool lost its check")
	}

	// Records swapped: the same steered names, so the zone is kept.
	a := "  - { name: s3.example.com, "
	b := "  - { name: s4.example.com, "
	i, j := strings.Index(text, a), strings.Index(text, b)
	end := j + strings.Index(text[j:], "\n") + 1
	text = text[:i] + text[j:end] + text[i:j] + text[end:]
	writeFile(t, path, text)
	fifth := rebuildNext(t, dir, fourth)
	if fifth.ZonesReused != 1 || fifth.Policies.RecordsBuilt != 0 {
		t.Fatalf("swapped records: %d zones kept, %d records built; want 1 and 0", fifth.ZonesReused, fifth.Policies.RecordsBuilt)
	}
	if r := fifth.Policies.Get("s3.example.com."); r.Index != 4 || r.Line != fourth.Policies.Get("s4.example.com.").Line {
		t.Fatalf("s3 moved down a line: index %d line %d", r.Index, r.Line)
	}
	expectAnswer(t, fifth, "s3.example.com.", 1, "NOERROR", "A 10.2.0.1")

	// Renamed and removed: the zone's steered names change with them.
	edit("name: s5.example.com,", "name: t5.example.com,")
	edit("  - { name: s6.example.com, policy: geo, pools: { de: { address: 10.1.0.7, health_check: web }, other: { address: 10.2.0.1 } } }\n", "")
	sixth := rebuildNext(t, dir, fifth)
	if sixth.ZonesReused != 0 || sixth.Policies.RecordsBuilt != 1 || len(sixth.Policies.Records) != 199 {
		t.Fatalf("renamed and removed: %d zones kept, %d records built of %d", sixth.ZonesReused, sixth.Policies.RecordsBuilt, len(sixth.Policies.Records))
	}
	expectAnswer(t, sixth, "t5.example.com.", 1, "NOERROR", "A 10.2.0.1")
	expectAnswer(t, sixth, "s5.example.com.", 1, "NXDOMAIN")
	expectAnswer(t, sixth, "s6.example.com.", 1, "NXDOMAIN")

	// A record's type: the zone is parsed and marked again.
	edit("  - { name: s9.example.com, policy: geo, pools: { de: { address: 10.1.0.10, health_check: web }, other: { address: 10.2.0.1 } } }\n",
		"  - { name: s9.example.com, type: CNAME, policy: geo, pools: { de: { target: www.example.com }, other: { target: www.example.com } } }\n")
	seventh := rebuildNext(t, dir, sixth)
	if seventh.ZonesReused != 0 {
		t.Fatal("a record that became a CNAME kept the zone marked for A")
	}
	expectAnswer(t, seventh, "s9.example.com.", 1, "NOERROR", "CNAME www.example.com.", "A 192.0.2.2")
}

func containsKey(keys []health.Key, addr, check string) bool {
	for _, k := range keys {
		if k.Addr.String() == addr && k.Check == check {
			return true
		}
	}
	return false
}

// benchRecords is gen.sh's configuration: n records over five policies of
// the embedded database; edit changes record edit's address (-1: none).
func benchRecords(n, edit int) string {
	var b strings.Builder
	b.WriteString("listen: [\"127.0.0.1:5399\"]\nzones: [{ origin: example.com, file: com.zone }]\npolicies:\n")
	for k := range 5 {
		fmt.Fprintf(&b, "  p%d:\n    rules:\n      - match: { country: [IN, US] }\n        pool: mumbai\n      - match: { continent: EU }\n        pool: frankfurt\n      - default: { pool: virginia }\n", k)
	}
	b.WriteString("records:\n")
	for i := range n {
		first := i%250 + 1
		if i == edit {
			first = 251
		}
		fmt.Fprintf(&b, "  - { name: s%d.example.com, ttl: 60, policy: p%d, pools: { mumbai: { address: 203.0.113.%d }, frankfurt: { address: 198.51.100.%d }, virginia: { address: 192.0.2.%d } } }\n",
			i, i%5, first, i%250+1, i%250+1)
	}
	return b.String()
}

// BenchmarkRebuildOneRecord is a reload of 10,000 steered records of
// which one changed: the snapshot build, from the parsed configuration.
func BenchmarkRebuildOneRecord(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "steer.yaml")
	for name, body := range map[string]string{"steer.yaml": benchRecords(10000, -1), "com.zone": comZone} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	prev, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(benchRecords(10000, 5000)), 0o644); err != nil {
		b.Fatal(err)
	}
	next, _, err := config.LoadAgain(nil, path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var s *snapshot.Snapshot
	for range b.N {
		if s, _, err = snapshot.BuildWith(next, snapshot.Options{Previous: prev}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if s.Policies.RecordsBuilt != 1 || s.ZonesReused != 1 {
		b.Fatalf("built %d records, kept %d zones; want 1 and 1", s.Policies.RecordsBuilt, s.ZonesReused)
	}
	b.ReportMetric(float64(s.Policies.RecordsReused), "records-reused")
}
