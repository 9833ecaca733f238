//go:build !race

package node

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// namesConfig is bench/scale.sh's shape (bench/lib/scale-records.sh) on the
// small Larkbook database: n steered names over one named policy, three
// pools each.
func namesConfig(db string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "geo: { databases: [%q] }\nzones: [{ origin: example.com, file: example.com.zone }]\n", db)
	b.WriteString(`policies:
  p0:
    rules:
      - match: { country: [IN, US] }
        pool: mumbai
      - match: { continent: EU }
        pool: frankfurt
      - default: { pool: virginia }
records:
`)
	for i := range n {
		fmt.Fprintf(&b, "  - { name: s%d.example.com, ttl: 60, policy: p0, pools: { mumbai: { address: 203.0.113.%d }, frankfurt: { address: 198.51.100.%d }, virginia: { address: 192.0.2.%d } } }\n",
			i, i%250+1, i%250+1, i%250+1)
	}
	return b.String()
}

// liveHeap is the heap in use after two collections.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// namesFootprint starts a node serving n steered names and returns the
// heap it holds once serving, what one /metrics scrape leaves behind, and
// the scrape's size; the node is shut down before it returns.
func namesFootprint(t *testing.T, db string, n int) (held, afterScrape int64, scrape int) {
	t.Helper()
	base := liveHeap()
	tn := startNode(t, map[string]string{"steer.yaml": namesConfig(db, n), "example.com.zone": zone("example.com", 1, "x")}, Options{})
	if got := tn.a(fmt.Sprintf("s%d.example.com", n-1)); got == "" {
		t.Fatalf("%d names: no answer for the last one", n)
	}
	time.Sleep(150 * time.Millisecond) // the start-up's garbage released (releaseDelay)
	held = liveHeap() - base
	before := liveHeap()
	rec := httptest.NewRecorder()
	tn.met.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	scrape = rec.Body.Len()
	rec = nil
	afterScrape = liveHeap() - before
	tn.Shutdown(t.Context())
	return held, afterScrape, scrape
}

// TestSteeredNameFootprint bounds what each added steered name costs a
// node (issue 31): the heap held per name between 200 and 2,000 names of
// one policy (7.9 KB before records of a policy shared their compiled
// rules and partition, 4.2 KB after; 2.7 KB once pools shared their specs,
// records their rule sets, and answer records were no longer kept), and
// that /metrics neither grows with the names by default nor leaves
// anything behind that does.
func TestSteeredNameFootprint(t *testing.T) {
	if inOwnProcess(t) {
		return
	}
	db, err := filepath.Abs("../../testdata/geo/larkbook-country-flat.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	namesFootprint(t, db, 1) // once: the shared partition cache, the packages' first allocations
	h1, s1, m1 := namesFootprint(t, db, 200)
	h2, s2, m2 := namesFootprint(t, db, 2000)
	perName := (h2 - h1) / 1800
	t.Logf("heap held: %d KiB at 200 names, %d KiB at 2,000: %d bytes a name; a scrape: %d and %d bytes, leaving %d and %d bytes",
		h1>>10, h2>>10, perName, m1, m2, s1, s2)
	const maxPerName = 3000
	if perName > maxPerName {
		t.Errorf("each steered name holds %d bytes of heap, want at most %d", perName, maxPerName)
	}
	if m2 > m1+1024 {
		t.Errorf("/metrics is %d bytes at 2,000 names and %d at 200: it grows with the names", m2, m1)
	}
	if grow := (s2 - s1) / 1800; grow > 40 {
		t.Errorf("a scrape leaves %d bytes a name behind (%d at 2,000 names, %d at 200)", grow, s2, s1)
	}
}
