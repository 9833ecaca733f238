package secondary

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return rr
}

func rrs(t testing.TB, lines ...string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, l := range lines {
		out = append(out, mustRR(t, l))
	}
	return out
}

func soaLine(serial int) string {
	return "u.example. 60 IN SOA ns.u.example. h.u.example. " + strconv.Itoa(serial) + " 60 60 600 60"
}

func mustTime(t testing.TB) time.Time {
	t.Helper()
	return time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
}

func TestSerialNewer(t *testing.T) {
	cases := []struct {
		a, b uint32
		want bool
	}{
		{2, 1, true},
		{1, 2, false},
		{1, 1, false},
		{0, 0xffffffff, true}, // wraparound: 0 follows 2^32-1
		{0xffffffff, 0, false},
		{5, 0xfffffff0, true},
		{0x7fffffff, 0, true},  // 2^31-1 ahead: newer
		{0x80000000, 0, false}, // exactly 2^31 apart: undefined, not newer
		{0, 0x80000000, false},
		{0x80000001, 0, false}, // more than 2^31 ahead is behind
		{0, 0x80000001, true},
		{2026120102, 2026120101, true},
	}
	for _, c := range cases {
		if got := serialNewer(c.a, c.b); got != c.want {
			t.Errorf("serialNewer(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestCacheFile(t *testing.T) {
	for origin, want := range map[string]string{
		".":               "root.zone",
		"root.":           "%72oot.zone",
		"example.com.":    "example.com.zone",
		"a/b.example.":    "a%2Fb.example.zone",
		"x_y-1.example.":  "x_y-1.example.zone",
		"Upper.example.":  "%55pper.example.zone",
		"sp ace.example.": "sp%20ace.example.zone",
	} {
		if got := CacheFile(origin); got != want {
			t.Errorf("CacheFile(%q) = %q, want %q", origin, got, want)
		}
	}
	if long := CacheFile(strings.Repeat("a", 250) + "."); !strings.HasPrefix(long, "%sha256-") {
		t.Errorf("long origin: %q", long)
	}
}

// base is u.example. at serial 1.
// base is a copy as the Manager keeps one: SOA first, the rest sorted.
func base(t *testing.T) []dns.RR {
	z := rrs(t, soaLine(1),
		"u.example. 60 IN NS ns.u.example.",
		"ns.u.example. 60 IN A 192.0.2.1",
		"a.u.example. 60 IN A 192.0.2.10",
		"keep.u.example. 60 IN TXT \"keep\"")
	sortRecords(z[1:])
	return z
}

func names(rrs []dns.RR) string {
	var b []string
	for _, rr := range rrs {
		b = append(b, rr.String())
	}
	return strings.Join(b, "\n")
}

func sameSet(t *testing.T, got, want []dns.RR) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s\nwant:\n%s", len(got), len(want), names(got), names(want))
	}
	if got[0].Header().Rrtype != dns.TypeSOA || !dns.IsDuplicate(got[0], want[0]) {
		t.Fatalf("SOA: got %v, want %v", got[0], want[0])
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if dns.IsDuplicate(g, w) {
				found = true
			}
		}
		if !found {
			t.Fatalf("missing %v in:\n%s", w, names(got))
		}
	}
}

func TestApplyIXFRMultipleDeltas(t *testing.T) {
	// 1→2: a goes, b comes; 2→3: b goes, c comes, keep gets a new TTL.
	resp := rrs(t, soaLine(3),
		soaLine(1), "A.U.EXAMPLE. 300 IN A 192.0.2.10", // case and TTL differ: still a match
		soaLine(2), "b.u.example. 60 IN A 192.0.2.11",
		soaLine(2), "b.u.example. 60 IN A 192.0.2.11",
		soaLine(3), "c.u.example. 60 IN A 192.0.2.12", "keep.u.example. 120 IN TXT \"keep\"",
		soaLine(3))
	got, full, uptodate, err := applyIXFR("u.example.", base(t), resp)
	if err != nil || full || uptodate {
		t.Fatalf("full=%v uptodate=%v err=%v", full, uptodate, err)
	}
	want := rrs(t, soaLine(3), "u.example. 60 IN NS ns.u.example.", "ns.u.example. 60 IN A 192.0.2.1",
		"c.u.example. 60 IN A 192.0.2.12", "keep.u.example. 120 IN TXT \"keep\"")
	sameSet(t, got, want)
	for _, rr := range got {
		if rr.Header().Name == "keep.u.example." && rr.Header().Ttl != 120 {
			t.Fatalf("re-added record kept the old TTL: %v", rr)
		}
	}
}

func TestApplyIXFRCondensed(t *testing.T) {
	resp := rrs(t, soaLine(3),
		soaLine(1), "a.u.example. 60 IN A 192.0.2.10",
		soaLine(3), "c.u.example. 60 IN A 192.0.2.12",
		soaLine(3))
	got, _, _, err := applyIXFR("u.example.", base(t), resp)
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, got, rrs(t, soaLine(3), "u.example. 60 IN NS ns.u.example.", "ns.u.example. 60 IN A 192.0.2.1",
		"c.u.example. 60 IN A 192.0.2.12", "keep.u.example. 60 IN TXT \"keep\""))
	// The input copy is untouched.
	sameSet(t, base(t), base(t))
}

func TestApplyIXFRFullAndUpToDate(t *testing.T) {
	got, full, _, err := applyIXFR("u.example.", base(t), rrs(t, soaLine(2), "u.example. 60 IN NS ns.u.example.", soaLine(2)))
	if err != nil || !full {
		t.Fatalf("AXFR-style answer: full=%v err=%v", full, err)
	}
	sameSet(t, got, rrs(t, soaLine(2), "u.example. 60 IN NS ns.u.example."))
	if _, _, up, err := applyIXFR("u.example.", base(t), rrs(t, soaLine(1))); err != nil || !up {
		t.Fatalf("single current SOA: uptodate=%v err=%v", up, err)
	}
	if _, _, up, err := applyIXFR("u.example.", base(t), rrs(t, soaLine(5))); err == nil || up {
		t.Fatalf("single newer SOA: uptodate=%v err=%v", up, err)
	}
	if _, _, up, err := applyIXFR("u.example.", base(t), rrs(t, soaLine(0))); err == nil || up {
		t.Fatalf("single older SOA: uptodate=%v err=%v", up, err)
	}
}

func TestApplyIXFRInconsistent(t *testing.T) {
	for name, resp := range map[string][]dns.RR{
		"deletion we do not have": rrs(t, soaLine(2), soaLine(1), "zz.u.example. 60 IN A 192.0.2.99", soaLine(2), soaLine(2)),
		"deletion rdata differs":  rrs(t, soaLine(2), soaLine(1), "a.u.example. 60 IN A 192.0.2.11", soaLine(2), soaLine(2)),
		"serial gap":              rrs(t, soaLine(3), soaLine(2), soaLine(3), "c.u.example. 60 IN A 192.0.2.12", soaLine(3)),
		"chain gap":               rrs(t, soaLine(4), soaLine(1), soaLine(2), soaLine(3), soaLine(4), soaLine(4)),
		"no final SOA":            rrs(t, soaLine(2), soaLine(1), soaLine(2), "c.u.example. 60 IN A 192.0.2.12"),
		"after final":             rrs(t, soaLine(2), soaLine(1), soaLine(2), soaLine(2), "c.u.example. 60 IN A 192.0.2.12"),
		"out of zone":             rrs(t, soaLine(2), soaLine(1), soaLine(2), "c.other. 60 IN A 192.0.2.12", soaLine(2)),
		"axfr style, bad end":     rrs(t, soaLine(2), "u.example. 60 IN NS ns.u.example.", soaLine(3)),
	} {
		if got, _, _, err := applyIXFR("u.example.", base(t), resp); err == nil {
			t.Errorf("%s: accepted:\n%s", name, names(got))
		}
	}
}

func TestZoneText(t *testing.T) {
	z := base(t)
	sorted := append([]dns.RR{z[0]}, z[1:]...)
	sortRecords(sorted[1:])
	text := zoneText("u.example.", sorted, "192.0.2.1:53", mustTime(t))
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "; zone u.example. serial 1 transferred from 192.0.2.1:53 by steer at 2026-") {
		t.Fatalf("first line %q", lines[0])
	}
	if !strings.Contains(lines[1], "SOA") || len(lines) != len(z)+1 {
		t.Fatalf("text:\n%s", text)
	}
	back, err := parseZone("u.example.", text)
	if err != nil {
		t.Fatal(err)
	}
	sameSet(t, back, z)
	if _, err := parseZone("u.example.", []byte("a.u.example. 60 IN A 192.0.2.1\n")); err == nil {
		t.Fatal("zone without SOA first accepted")
	}
}

// TestApplyIXFRMatchesRecompute: on random copies and differences,
// applyIXFR (lookups in the sorted copy, the additions merged in) gives
// exactly what applying the difference to a set and sorting it all gives,
// in the same order.
func TestApplyIXFRMatchesRecompute(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	rec := func(i, v int) string {
		return fmt.Sprintf("n%d.u.example. %d IN A 192.0.2.%d", i%40, 60+v%2*60, v%7)
	}
	for round := range 50 {
		var lines []string
		seen := map[string]bool{}
		for range 80 {
			i, v := rnd.IntN(100), rnd.IntN(14)
			key := fmt.Sprintf("%d/%d", i%40, v%7)
			if !seen[key] {
				seen[key] = true
				lines = append(lines, rec(i, v))
			}
		}
		cur := append(rrs(t, soaLine(1)), rrs(t, lines...)...)
		sortRecords(cur[1:])
		// Delete a few of cur's records (case changed), add new ones and
		// re-add one with another TTL.
		var dels, adds []string
		for _, rr := range cur[1:] {
			if rnd.IntN(8) == 0 {
				dels = append(dels, strings.ToUpper(rr.Header().Name)+strings.TrimPrefix(rr.String(), rr.Header().Name))
			}
		}
		for range 6 {
			i, v := rnd.IntN(100), rnd.IntN(14)
			if !seen[fmt.Sprintf("%d/%d", i%40, v%7)] {
				adds = append(adds, rec(i, v))
				seen[fmt.Sprintf("%d/%d", i%40, v%7)] = true
			}
		}
		if rr := cur[1+rnd.IntN(len(cur)-1)]; !strings.Contains(strings.Join(dels, "\n"), rr.String()[len(rr.Header().Name):]) {
			c := dns.Copy(rr)
			c.Header().Ttl = 999
			adds = append(adds, c.String())
		}
		resp := append(rrs(t, soaLine(2), soaLine(1)), rrs(t, dels...)...)
		resp = append(resp, mustRR(t, soaLine(2)))
		resp = append(resp, rrs(t, adds...)...)
		resp = append(resp, mustRR(t, soaLine(2)))
		got, _, _, err := applyIXFR("u.example.", cur, resp)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		set := rrset{}
		for _, rr := range cur[1:] {
			set.add(rr)
		}
		for _, l := range dels {
			set.remove(mustRR(t, l))
		}
		for _, l := range adds {
			set.add(mustRR(t, l))
		}
		want := rrs(t, soaLine(2))
		for _, b := range set {
			want = append(want, b...)
		}
		sortRecords(want[1:])
		if names(got) != names(want) {
			t.Fatalf("round %d:\ngot\n%s\nwant\n%s", round, names(got), names(want))
		}
	}
}
