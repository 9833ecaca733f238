package snapshot_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
