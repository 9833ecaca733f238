package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/snapshot"
)

// packConfig serves the zones z<i>.example. from z<i>.zone, for each i
// in zones.
func packConfig(zones ...int) string {
	var b strings.Builder
	b.WriteString("zones:\n")
	for _, i := range zones {
		fmt.Fprintf(&b, "  - { origin: z%d.example, file: z%d.zone }\n", i, i)
	}
	return b.String()
}

// packZone is zone z<i>.example. at version v (its www A is 192.0.2.v).
func packZone(i, v int) string {
	return fmt.Sprintf("$ORIGIN z%d.example.\n$TTL 300\n@ SOA ns1 h %d 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.%d\n", i, v, v)
}

type packFixture struct {
	t          *testing.T
	dir, cache string
}

func newPackFixture(t *testing.T, zones int) *packFixture {
	files := map[string]string{"steer.yaml": packConfig(seq(zones)...)}
	for i := range zones {
		files[fmt.Sprintf("z%d.zone", i)] = packZone(i, 1)
	}
	_, dir := write(t, files)
	return &packFixture{t, dir, filepath.Join(t.TempDir(), "zones")}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// start builds the configuration as a start does (no previous snapshot),
// keeping the copies in the cache directory.
func (f *packFixture) start() (*snapshot.Snapshot, diag.Problems) {
	f.t.Helper()
	snap, warns, err := snapshot.BuildWith(reload(f.t, f.dir), snapshot.Options{CacheDir: f.cache})
	if err != nil {
		f.t.Fatal(err)
	}
	return snap, warns
}

func (f *packFixture) zone(i int, body string) {
	writeFile(f.t, filepath.Join(f.dir, fmt.Sprintf("z%d.zone", i)), body)
}

// files lists the cache directory.
func (f *packFixture) files() []string {
	f.t.Helper()
	ents, err := os.ReadDir(f.cache)
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func (f *packFixture) wantFiles(want ...string) {
	f.t.Helper()
	if got := f.files(); !slices.Equal(got, want) {
		f.t.Fatalf("cache directory holds %v, want %v", got, want)
	}
}

func (f *packFixture) packTime() time.Time {
	f.t.Helper()
	st, err := os.Stat(filepath.Join(f.cache, snapshot.PackName))
	if err != nil {
		f.t.Fatal(err)
	}
	return st.ModTime()
}

// servesCopy checks that zone i is degraded, served from the copy named
// from, whose www A is 192.0.2.v.
func (f *packFixture) servesCopy(snap *snapshot.Snapshot, i int, from string, v int) {
	f.t.Helper()
	origin := fmt.Sprintf("z%d.example.", i)
	if len(snap.Degraded) != 1 || snap.Degraded[0].Origin != origin || snap.Degraded[0].Serving != "last good copy (from cache "+from+")" {
		f.t.Fatalf("Degraded = %+v, want %s from %s", snap.Degraded, origin, from)
	}
	expectAnswer(f.t, snap, "www."+origin, dns.TypeA, "NOERROR", fmt.Sprintf("A 192.0.2.%d", v))
}

func (f *packFixture) inPack(i int) string {
	return filepath.Join(f.cache, snapshot.PackName) + fmt.Sprintf("#z%d.example.zone", i)
}

// TestCopyPackLastGood: many zones' last good copies are kept in one pack
// (a first start of 100,000 zones wrote 100,000 files); a bad zone file
// at a start serves the pack's copy; fewer changed copies are written as
// files of their own, which override the pack's; the next pack takes
// them in (also a zone's whose file is bad now) and removes them; a zone
// left out of the configuration keeps its copy.
func TestCopyPackLastGood(t *testing.T) {
	defer snapshot.SetPackMin(4)()
	f := newPackFixture(t, 6)
	f.start()
	f.wantFiles(snapshot.PackName)

	// A restart with the same files writes nothing.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(f.cache, snapshot.PackName), old, old); err != nil {
		t.Fatal(err)
	}
	f.start()
	if !f.packTime().Equal(old) {
		t.Fatalf("an unchanged pack was written again")
	}

	// A bad zone file at a start: its copy in the pack serves.
	f.zone(2, "this is not a zone\n")
	snap, _ := f.start()
	f.servesCopy(snap, 2, f.inPack(2), 1)

	// Two zones changed (fewer than packMin): files of their own; the
	// pack stays as it is.
	f.zone(2, packZone(2, 2))
	f.zone(3, packZone(3, 2))
	f.start()
	f.wantFiles(snapshot.PackName, "z2.example.zone", "z3.example.zone")
	if !f.packTime().Equal(old) {
		t.Fatalf("the pack was written again for two changed zones")
	}
	f.zone(3, "broken again\n")
	snap, _ = f.start()
	f.servesCopy(snap, 3, filepath.Join(f.cache, "z3.example.zone"), 2)

	// Four changed while zone 3 is still bad: a new pack of every copy,
	// zone 3's taken from its own file, which goes with zone 2's.
	for _, i := range []int{0, 1, 4, 5} {
		f.zone(i, packZone(i, 3))
	}
	f.start()
	f.wantFiles(snapshot.PackName)
	snap, _ = f.start()
	f.servesCopy(snap, 3, f.inPack(3), 2)
	f.zone(3, packZone(3, 3))

	// Zone 5 left out of the configuration while four others change
	// (a new pack): back with a bad file, its copy still serves.
	writeFile(t, filepath.Join(f.dir, "steer.yaml"), packConfig(0, 1, 2, 3, 4))
	for i := range 4 {
		f.zone(i, packZone(i, 4))
	}
	f.start()
	writeFile(t, filepath.Join(f.dir, "steer.yaml"), packConfig(seq(6)...))
	f.zone(5, "broken\n")
	snap, _ = f.start()
	f.servesCopy(snap, 5, f.inPack(5), 3)
	f.wantFiles(snapshot.PackName)
}

// TestCopyPackCrash: what a crash can leave in the cache directory. A
// file of its own older than the pack (left when a new pack had taken it
// in but not yet removed it) loses to the pack's copy; one newer wins. A
// pack written only in part is no copy: the zone is SERVFAIL, the
// warning says why, and the build writes a new pack. A temporary file is
// not taken for a copy.
func TestCopyPackCrash(t *testing.T) {
	defer snapshot.SetPackMin(4)()
	f := newPackFixture(t, 6)
	f.start()
	packed := f.packTime()
	own := filepath.Join(f.cache, "z1.example.zone")
	writeFile(t, own, packZone(1, 9))
	before := packed.Add(-time.Second)
	if err := os.Chtimes(own, before, before); err != nil {
		t.Fatal(err)
	}
	f.zone(1, "broken\n")
	snap, _ := f.start()
	f.servesCopy(snap, 1, f.inPack(1), 1)
	after := packed.Add(time.Second)
	if err := os.Chtimes(own, after, after); err != nil {
		t.Fatal(err)
	}
	snap, _ = f.start()
	f.servesCopy(snap, 1, own, 9)
	if err := os.Remove(own); err != nil {
		t.Fatal(err)
	}

	// Cut in half.
	pack := filepath.Join(f.cache, snapshot.PackName)
	st, err := os.Stat(pack)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(pack, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.cache, ".tmp-123.pack"), "half a pack")
	writeFile(t, filepath.Join(f.cache, ".tmp-456.zone"), "half a zone")
	snap, warns := f.start()
	if len(snap.Degraded) != 1 || snap.Degraded[0].Serving != snapshot.ServingServfail {
		t.Fatalf("Degraded = %+v, want z1.example. SERVFAIL", snap.Degraded)
	}
	if !strings.Contains(fmt.Sprint(warns), "written only in part") {
		t.Errorf("warnings do not say the pack is damaged: %v", warns)
	}
	// That build wrote a new pack of the other zones' copies.
	f.zone(1, packZone(1, 5))
	f.start()
	f.zone(1, "broken\n")
	snap, _ = f.start()
	f.servesCopy(snap, 1, own, 5)
	f.zone(0, "broken\n")
	snap, _ = f.start()
	if len(snap.Degraded) != 2 || snap.Degraded[0].Serving != "last good copy (from cache "+f.inPack(0)+")" {
		t.Fatalf("Degraded = %+v, want z0.example. from the new pack", snap.Degraded)
	}
}

// TestCopyPackTakesFilesIn: the copies an earlier version kept in a file
// each (or many reloads left) go into a pack at the next start even when
// none changed, so that later restarts read one file instead of each.
func TestCopyPackTakesFilesIn(t *testing.T) {
	restore := snapshot.SetPackMin(1 << 30)
	f := newPackFixture(t, 6)
	f.start()
	restore()
	f.wantFiles(seqNames(6)...)
	defer snapshot.SetPackMin(4)()
	f.start()
	f.wantFiles(snapshot.PackName)
	f.zone(4, "broken\n")
	snap, _ := f.start()
	f.servesCopy(snap, 4, f.inPack(4), 1)
}

func seqNames(n int) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("z%d.example.zone", i))
	}
	return s
}

// TestCopyPackDamagedCopy: a copy whose bytes no longer match its
// checksum is no copy (the zone is SERVFAIL and the warning says so),
// and the next pack leaves it out, keeping every other.
func TestCopyPackDamagedCopy(t *testing.T) {
	defer snapshot.SetPackMin(4)()
	f := newPackFixture(t, 6)
	f.start()
	pack := filepath.Join(f.cache, snapshot.PackName)
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "z0.example.") // in the first zone's copy
	b[i] = 'y'
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.zone(0, "broken\n")
	snap, warns := f.start()
	if len(snap.Degraded) != 1 || snap.Degraded[0].Serving != snapshot.ServingServfail {
		t.Fatalf("Degraded = %+v, want z0.example. SERVFAIL", snap.Degraded)
	}
	if !strings.Contains(fmt.Sprint(warns), "is damaged") {
		t.Errorf("warnings do not say the copy is damaged: %v", warns)
	}
	for i := 1; i <= 4; i++ {
		f.zone(i, packZone(i, 2))
	}
	if _, warns = f.start(); !strings.Contains(fmt.Sprint(warns), "not taken into copies.pack") {
		t.Errorf("warnings do not say the damaged copy is left out: %v", warns)
	}
	f.zone(5, "broken\n")
	snap, _ = f.start()
	if len(snap.Degraded) != 2 || snap.Degraded[1].Serving != "last good copy (from cache "+f.inPack(5)+")" {
		t.Fatalf("Degraded = %+v, want z5.example. from the new pack", snap.Degraded)
	}
}
