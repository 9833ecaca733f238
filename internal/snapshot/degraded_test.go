package snapshot_test

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/zone"
)

// The served zones: example.com holds a steered name (shop), lab.example.com
// (a child zone) another (www2), example.org none.
const (
	degradedConfig = `geo:
  databases: [geo.mmdb]
zones:
  - origin: example.com
    file: com.zone
  - origin: lab.example.com
    file: lab.zone
  - origin: example.org
    file: org.zone
records:
  - name: shop.example.com
    ttl: 60
    pools:
      de: { address: 10.0.0.1 }
      other: { address: 10.0.0.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { pool: other }
  - name: www2.lab.example.com
    ttl: 60
    pools:
      only: { address: 10.0.0.9 }
    rules:
      - default: { pool: only }
`
	comZone = `$ORIGIN example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.2
to-lab IN CNAME www.lab
`
	labZone = `$ORIGIN lab.example.com.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.3
`
	// labBroken has a bad address at line 6.
	labBroken = `$ORIGIN lab.example.com.
$TTL 300
@ IN SOA ns1 hostmaster 2 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.333
`
	orgZone = `$ORIGIN example.org.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.4
`
)

// writeGeo writes a flat country database mapping 192.0.2.0/24 to cc at
// path, replacing the file atomically as a deploy would.
func writeGeo(t *testing.T, path, cc string) {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Steer-Test-Country", IPVersion: 6, RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, n, _ := net.ParseCIDR("192.0.2.0/24")
	if err := w.Insert(n, mmdbtype.Map{"country_code": mmdbtype.String(cc)}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b.String())
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// setup writes the configuration, its zones (lab as given) and a geo
// database placing 192.0.2.0/24 in Germany.
func setup(t *testing.T, lab string) (*config.Config, string) {
	t.Helper()
	cfg, dir := write(t, map[string]string{"steer.yaml": degradedConfig, "com.zone": comZone, "lab.zone": lab, "org.zone": orgZone})
	writeGeo(t, filepath.Join(dir, "geo.mmdb"), "DE")
	return cfg, dir
}

func reload(t *testing.T, dir string) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var client = netip.MustParseAddr("192.0.2.1") // in 192.0.2.0/24

// ask sends a plain query (no EDNS: the fast path takes it when it can)
// through a handler serving snap, checks that the general path gives the
// same bytes, and returns the rcode and the answer records as text.
func ask(t *testing.T, snap *snapshot.Snapshot, name string, qtype uint16) (string, []string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	req, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	h := dnsserver.NewHandler(snap)
	out := h.HandleFrom(req, dnsserver.UDP, client, make([]byte, 0, 4096))
	gen := h.HandleGeneral(req, dnsserver.UDP, client, make([]byte, 0, 4096))
	if !bytes.Equal(out, gen) {
		t.Errorf("%s %s: the fast path and the general path differ", name, dns.TypeToString[qtype])
	}
	var r dns.Msg
	if err := r.Unpack(out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var ans []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		ans = append(ans, f[3]+" "+f[4])
	}
	return dns.RcodeToString[r.Rcode], ans
}

func expectAnswer(t *testing.T, snap *snapshot.Snapshot, name string, qtype uint16, rcode string, answer ...string) {
	t.Helper()
	gotRcode, got := ask(t, snap, name, qtype)
	if gotRcode != rcode || strings.Join(got, ", ") != strings.Join(answer, ", ") {
		t.Errorf("%s %s = %s %v, want %s %v", name, dns.TypeToString[qtype], gotRcode, got, rcode, answer)
	}
}

func TestBuildWithBrokenZoneServfail(t *testing.T) {
	cfg, dir := setup(t, labBroken)
	labFile := filepath.Join(dir, "lab.zone")

	// Build stays strict: the configuration is rejected, at the zone's line.
	if snap, _, err := snapshot.Build(cfg); snap != nil || err == nil {
		t.Fatalf("Build = %v, %v; want an error", snap, err)
	} else if ps := problems(t, err); !has(ps, labFile, 6, "bad A") {
		t.Errorf("Build problems = %v, want %s:6 bad A", ps, labFile)
	}

	snap, warns, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatalf("BuildWith: %v", err)
	}
	if len(snap.Degraded) != 1 {
		t.Fatalf("Degraded = %+v, want lab.example.com.", snap.Degraded)
	}
	d := snap.Degraded[0]
	if d.Origin != "lab.example.com." || d.File != labFile || d.Serving != snapshot.ServingServfail ||
		!strings.HasPrefix(d.Problem, labFile+":6: ") || !has(d.Problems, labFile, 6, "bad A") ||
		len(d.Skipped) != 1 || d.Skipped[0] != "www2.lab.example.com." {
		t.Errorf("Degraded[0] = %+v", d)
	}
	if !has(warns, labFile, 6, "bad A") || !has(warns, cfg.File, 6, "lab.example.com.", "SERVFAIL") ||
		!has(warns, cfg.File, 20, "www2.lab.example.com.", "SERVFAIL") {
		t.Errorf("warnings = %v, want the zone's problem at %s:6 and notes at the zone and record entries", warns, labFile)
	}

	expectAnswer(t, snap, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.2")
	expectAnswer(t, snap, "www.example.org.", dns.TypeA, "NOERROR", "A 192.0.2.4")
	expectAnswer(t, snap, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.1")
	expectAnswer(t, snap, "lab.example.com.", dns.TypeSOA, "SERVFAIL")
	expectAnswer(t, snap, "www.lab.example.com.", dns.TypeA, "SERVFAIL")
	expectAnswer(t, snap, "Www.Lab.Example.Com.", dns.TypeAAAA, "SERVFAIL")
	expectAnswer(t, snap, "nothing.here.lab.example.com.", dns.TypeA, "SERVFAIL")
	expectAnswer(t, snap, "www2.lab.example.com.", dns.TypeA, "SERVFAIL")
	// A chain into the failed zone stops there: the resolver follows it.
	expectAnswer(t, snap, "to-lab.example.com.", dns.TypeA, "NOERROR", "CNAME www.lab.example.com.")
	if k, _, _ := snap.Zones.Classify("www.lab.example.com."); k != zone.FastNone {
		t.Errorf("Classify(www.lab.example.com.) = %v, want FastNone", k)
	}
	if s := snap.Summary(); !strings.Contains(s, "1 zones degraded") {
		t.Errorf("Summary() = %q", s)
	}
}

func TestBuildWithCache(t *testing.T) {
	cfg, dir := setup(t, labZone)
	cache := filepath.Join(t.TempDir(), "zones")
	snap, warns, err := snapshot.BuildWith(cfg, snapshot.Options{CacheDir: cache})
	if err != nil || len(snap.Degraded) != 0 || len(warns) != 0 {
		t.Fatalf("good build: %v, degraded %v, warnings %v", err, snap.Degraded, warns)
	}
	kept := filepath.Join(cache, "lab.example.com.zone")
	if b, err := os.ReadFile(kept); err != nil || string(b) != labZone {
		t.Fatalf("cached copy %s = %q, %v; want the zone file", kept, b, err)
	}
	// An unchanged zone is not written again.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(kept, old, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kept); err != nil || !st.ModTime().Equal(old) {
		t.Errorf("unchanged zone rewritten: %v %v", st.ModTime(), err)
	}

	// A restart after a bad deploy: no previous snapshot, the cache serves.
	writeFile(t, filepath.Join(dir, "lab.zone"), labBroken)
	snap, warns, err = snapshot.BuildWith(reload(t, dir), snapshot.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Degraded) != 1 || snap.Degraded[0].Serving != "last good copy (from cache "+kept+")" {
		t.Fatalf("Degraded = %+v, want lab.example.com. from %s", snap.Degraded, kept)
	}
	if !has(warns, filepath.Join(dir, "lab.zone"), 6, "bad A") {
		t.Errorf("warnings = %v", warns)
	}
	expectAnswer(t, snap, "www.lab.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.3")
	expectAnswer(t, snap, "www2.lab.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.9")
	expectAnswer(t, snap, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.2")
	if b, _ := os.ReadFile(kept); string(b) != labZone {
		t.Errorf("the broken zone replaced the cached copy: %q", b)
	}
}

func TestBuildWithPrevious(t *testing.T) {
	cfg, dir := setup(t, labZone)
	prev, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Queries keep reading the published snapshot while the next one is
	// built from it (the race detector watches).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h := dnsserver.NewHandler(prev)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, name := range []string{"www.lab.example.com.", "www2.lab.example.com.", "nx.lab.example.com."} {
				m := new(dns.Msg)
				m.SetQuestion(name, dns.TypeA)
				req, _ := m.Pack()
				h.HandleFrom(req, dnsserver.UDP, client, make([]byte, 0, 512))
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	writeFile(t, filepath.Join(dir, "com.zone"), strings.Replace(comZone, "192.0.2.2", "192.0.2.99", 1))
	writeFile(t, filepath.Join(dir, "org.zone"), strings.Replace(orgZone, "192.0.2.4", "192.0.2.98", 1))
	writeFile(t, filepath.Join(dir, "lab.zone"), labBroken)
	next, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Degraded) != 1 || next.Degraded[0].Origin != "lab.example.com." || next.Degraded[0].Serving != snapshot.ServingPrevious {
		t.Fatalf("Degraded = %+v", next.Degraded)
	}
	expectAnswer(t, next, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.99")
	expectAnswer(t, next, "www.example.org.", dns.TypeA, "NOERROR", "A 192.0.2.98")
	expectAnswer(t, next, "www.lab.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.3")
	expectAnswer(t, next, "www2.lab.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.9")
	if next.Zones.Zone("lab.example.com.") == prev.Zones.Zone("lab.example.com.") {
		t.Error("the published zone object was reused (and marked again)")
	}
	expectAnswer(t, prev, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.2")

	// Still broken at the next reload: the copy carries on.
	again, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: next})
	if err != nil || len(again.Degraded) != 1 {
		t.Fatalf("second reload: %v %+v", err, again)
	}
	expectAnswer(t, again, "www.lab.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.3")

	// A zone edit that conflicts with a steered record is degraded too
	// when the last good copy agrees with the records...
	writeFile(t, filepath.Join(dir, "lab.zone"), labZone)
	writeFile(t, filepath.Join(dir, "com.zone"), comZone+"shop IN A 192.0.2.7\n")
	conf, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{Previous: next})
	if err != nil || len(conf.Degraded) != 1 || conf.Degraded[0].Origin != "example.com." ||
		!strings.Contains(conf.Degraded[0].Problem, "already has A records") {
		t.Fatalf("conflicting edit: %v %+v", err, conf)
	}
	expectAnswer(t, conf, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.99")
	expectAnswer(t, conf, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.1")
	// ...and rejects the configuration when none does.
	if s, _, err := snapshot.BuildWith(reload(t, dir), snapshot.Options{}); err == nil {
		t.Errorf("conflicting zone without a last good copy: built %v", s.Degraded)
	} else if ps := problems(t, err); !has(ps, cfg.File, 11, "shop.example.com.", "already has A records") {
		t.Errorf("problems = %v", ps)
	}
}

func TestWithGeo(t *testing.T) {
	cfg, dir := setup(t, labZone)
	old, _, err := snapshot.BuildWith(cfg, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, old, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.1")

	// A pending zone edit, and a new geo database moving the client out
	// of Germany.
	writeFile(t, filepath.Join(dir, "com.zone"), strings.Replace(comZone, "192.0.2.2", "192.0.2.99", 1))
	writeGeo(t, filepath.Join(dir, "geo.mmdb"), "FR")
	snap, _, err := old.WithGeo()
	if err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, snap, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.2")
	expectAnswer(t, snap, "www.example.com.", dns.TypeA, "NOERROR", "A 192.0.2.2")
	expectAnswer(t, snap, "www2.lab.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.9")
	expectAnswer(t, old, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.1")
	if snap.Zones != old.Zones || snap.Config != old.Config || snap.Policies == old.Policies || snap.Geo == old.Geo {
		t.Error("WithGeo must share the zones and config and replace the geo set and policies")
	}

	// A database that does not open: an error, and the old snapshot serves on.
	writeFile(t, filepath.Join(dir, "geo.mmdb"), "not a database")
	if s, _, err := snap.WithGeo(); err == nil || s != nil {
		t.Errorf("WithGeo with a broken database = %v, %v", s, err)
	} else if ps := problems(t, err); !has(ps, cfg.File, 2, "geo database geo.mmdb") {
		t.Errorf("problems = %v", ps)
	}
	expectAnswer(t, snap, "shop.example.com.", dns.TypeA, "NOERROR", "A 10.0.0.2")
}

func TestCacheFile(t *testing.T) {
	for origin, want := range map[string]string{
		".":                "root.zone",
		"example.com.":     "example.com.zone",
		"root.":            "%72oot.zone",
		"a/b.example.":     "a%2Fb.example.zone",
		`we\.ird\032x.`:    `we%5C.ird%5C032x.zone`,
		"*.x.":             "%2A.x.zone",
		"under_score.com.": "under_score.com.zone",
	} {
		if got := snapshot.CacheFile(origin); got != want {
			t.Errorf("CacheFile(%q) = %q, want %q", origin, got, want)
		}
	}
	long := strings.Repeat("abcdefghij.", 22)
	if got := snapshot.CacheFile(long); len(got) > 255 || !strings.HasPrefix(got, "%sha256-") {
		t.Errorf("CacheFile(long) = %q", got)
	}
}
