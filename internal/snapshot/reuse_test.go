package snapshot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/snapshot"
)

// A reload reuses a geo database whose file has the same bytes (touched
// or not) and the partitions compiled against it; a file
// with new bytes is read and compiled again.
func TestBuildWithReusesGeoAndPolicies(t *testing.T) {
	cfg, dir := setup(t, labZone)
	first, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Policies.Compiled != 2 {
		t.Fatalf("first load compiled %d partitions, want 2", first.Policies.Compiled)
	}
	next := func(prev *snapshot.Snapshot) *snapshot.Snapshot {
		t.Helper()
		s, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	same := next(first)
	if same.Geo != first.Geo || same.Policies.Compiled != 0 || same.Policies.Reused != 2 {
		t.Fatalf("unchanged: geo reused %v, compiled %d, reused %d", same.Geo == first.Geo, same.Policies.Compiled, same.Policies.Reused)
	}
	// Touched, same bytes: found equal, reused.
	geoPath := filepath.Join(dir, "geo.mmdb")
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(geoPath, later, later); err != nil {
		t.Fatal(err)
	}
	touched := next(same)
	if touched.Geo != first.Geo || touched.Policies.Compiled != 0 {
		t.Fatalf("touched: geo reused %v, compiled %d", touched.Geo == first.Geo, touched.Policies.Compiled)
	}
	// New bytes: a new database, everything compiled against it.
	writeGeo(t, geoPath, "FR")
	changed := next(touched)
	if changed.Geo == first.Geo || changed.Policies.Compiled != 2 || changed.Policies.Reused != 0 {
		t.Fatalf("changed: geo reused %v, compiled %d, reused %d", changed.Geo == first.Geo, changed.Policies.Compiled, changed.Policies.Reused)
	}
	expectAnswer(t, changed, "shop.example.com.", 1, "NOERROR", "A 10.0.0.2")
	expectAnswer(t, same, "shop.example.com.", 1, "NOERROR", "A 10.0.0.1")
}

// A reload keeps each zone whose file has the same bytes and whose
// steered names are the same, parses the others, and answers alike.
func TestBuildWithReusesUnchangedZones(t *testing.T) {
	cfg, dir := setup(t, labZone)
	first, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "org.zone"), orgZone+"new IN A 192.0.2.77\n")
	second, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: first})
	if err != nil {
		t.Fatal(err)
	}
	if second.ZonesReused != 2 || second.Zones.Zone("example.com.") != first.Zones.Zone("example.com.") ||
		second.Zones.Zone("example.org.") == first.Zones.Zone("example.org.") {
		t.Fatalf("reused %d zones; example.com kept %v, example.org kept %v", second.ZonesReused,
			second.Zones.Zone("example.com.") == first.Zones.Zone("example.com."), second.Zones.Zone("example.org.") == first.Zones.Zone("example.org."))
	}
	expectAnswer(t, second, "new.example.org.", 1, "NOERROR", "A 192.0.2.77")
	expectAnswer(t, second, "shop.example.com.", 1, "NOERROR", "A 10.0.0.1")
	expectAnswer(t, second, "www.example.com.", 1, "NOERROR", "A 192.0.2.2")
	// A record steered in example.com no more: the same bytes, but its
	// marks differ, so the zone is parsed again and shop is a plain name.
	raw, err := os.ReadFile(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "steer.yaml"), strings.Replace(string(raw), "name: shop.example.com", "name: shop2.example.com", 1))
	third, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: second})
	if err != nil {
		t.Fatal(err)
	}
	if third.Zones.Zone("example.com.") == second.Zones.Zone("example.com.") {
		t.Fatal("a zone whose steered names changed was kept with the old marks")
	}
	expectAnswer(t, third, "shop.example.com.", 1, "NXDOMAIN")
	expectAnswer(t, third, "shop2.example.com.", 1, "NOERROR", "A 10.0.0.1")
}

// A reload of a configuration file with the same bytes keeps its parse,
// and with the same databases the served table itself: nothing is built.
func TestReloadOfUnchangedConfigBuildsNothing(t *testing.T) {
	cfg, dir := setup(t, labZone)
	path := filepath.Join(dir, "steer.yaml")
	first, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, same, err := config.LoadAgain(nil, path, cfg)
	if err != nil || !same || again != cfg {
		t.Fatalf("LoadAgain of the same bytes: %v %v (same parse %v)", err, same, again == cfg)
	}
	second, _, err := snapshot.BuildWith(again, snapshot.Options{Previous: first})
	if err != nil {
		t.Fatal(err)
	}
	if second.Policies != first.Policies || !second.PoliciesKept || second.ZonesReused != 3 || !strings.Contains(second.Summary(), "unchanged") {
		t.Fatalf("unchanged: table kept %v, zones kept %d", second.Policies == first.Policies, second.ZonesReused)
	}
	raw, _ := os.ReadFile(path)
	writeFile(t, path, string(raw)+"\n# a comment\n")
	changed, same, err := config.LoadAgain(nil, path, cfg)
	if err != nil || same || changed == cfg {
		t.Fatalf("LoadAgain of new bytes must parse them: %v %v", err, same)
	}
	third, _, err := snapshot.BuildWith(changed, snapshot.Options{Previous: second})
	if err != nil {
		t.Fatal(err)
	}
	if third.Policies == second.Policies || third.Policies.Reused != 2 || third.Policies.Compiled != 0 {
		t.Fatalf("a new parse builds a new table from reused partitions: reused %d compiled %d", third.Policies.Reused, third.Policies.Compiled)
	}
}
