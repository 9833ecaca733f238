package difftest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// signedZones are the peer zones signed for TestDifferentialSigned, and
// how: BIND's chain test signs its wildcard zones (one NSEC, one NSEC3),
// and PowerDNS's dnssec-parent.com has secure, insecure and
// empty-non-terminal delegations, signed here with NSEC3 opt-out.
var signedZones = []struct {
	origin string
	args   []string
}{
	{"wildcard-nsec.example.", nil},
	{"wildcard-secure.example.", []string{"-3", "ab12", "-H", "1"}},
	{"dnssec-parent.com.", []string{"-3", "-", "-H", "0", "-A"}},
}

// signPeerZone signs the peer zone file for origin with a fresh KSK and
// ZSK by BIND's dnssec-signzone into dir and returns the signed file.
func signPeerZone(t *testing.T, file, origin, dir string, args []string) string {
	t.Helper()
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	o := strings.TrimSuffix(origin, ".")
	run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", dir, o)
	run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-K", dir, o)
	out := filepath.Join(dir, o+".signed")
	run("dnssec-signzone", append(append([]string{"-q", "-S", "-K", dir, "-o", o, "-f", out}, args...), file)...)
	return out
}

// TestDifferentialSigned serves peer zones signed elsewhere (BIND's
// dnssec-signzone: NSEC, NSEC3, NSEC3 with opt-out) from steer, Knot and
// NSD, the same signed files, and asks all three every question made
// from the zone's records, with DO: steer must answer as Knot or NSD do,
// or as the allow list explains, RRSIGs and the NSEC or NSEC3 records
// that prove each denial included.
func TestDifferentialSigned(t *testing.T) {
	dnstest.NeedTool(t, "dnssec-signzone")
	dir := peerDir(t)
	byOrigin := map[string]peerZone{}
	for _, z := range readZones(t, dir) {
		byOrigin[z.Origin] = z
	}
	work := t.TempDir()
	var zones []peerZone
	for _, s := range signedZones {
		z, ok := byOrigin[s.origin]
		if !ok {
			t.Fatalf("no peer zone %s", s.origin)
		}
		sub := filepath.Join(work, s.origin)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		z.File = signPeerZone(t, z.File, s.origin, sub, s.args)
		zones = append(zones, z)
	}
	knot := peertest.StartKnot(t, peerZones(zones), peertest.Options{
		Top:  "acl:\n  - id: xfr\n    address: 127.0.0.0/8\n    action: transfer",
		Zone: "acl: xfr",
	})
	nsd := peertest.StartNSD(t, peerZones(zones), peertest.Options{})
	steer, snap := startSteer(t, zones)
	for _, z := range zones {
		if !knot.Loaded(z.Origin) || !nsd.Loaded(z.Origin) {
			t.Fatalf("%s: Knot loaded %v, NSD %v:\n%s\n%s", z.Origin, knot.Loaded(z.Origin), nsd.Loaded(z.Origin), knot.Log, nsd.Log)
		}
		if zz := snap.Zones.Zone(z.Origin); zz == nil || !zz.Presigned() {
			t.Errorf("steer does not serve %s pre-signed", z.Origin)
		}
	}
	for _, d := range snap.Degraded {
		t.Fatalf("steer did not load %s: %s", d.Origin, d.Problem)
	}

	r := rand.New(rand.NewPCG(29, 5))
	var qs []question
	for _, z := range zones {
		for _, q := range zoneQuestions(r, z.Origin, transfer(t, knot.Addr, z.Origin)) {
			// Every question with DO over EDNS, as a validating
			// resolver asks; a few without, to see no DNSSEC record
			// comes unasked.
			if r.IntN(8) > 0 {
				q.edns, q.do = true, true
			}
			qs = append(qs, q)
		}
	}
	results := make([]result, len(qs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = result{q: qs[i], steer: ask(steer, qs[i]), knot: ask(knot.Addr, qs[i]), nsd: ask(nsd.Addr, qs[i])}
			}
		}()
	}
	for i := range qs {
		next <- i
	}
	close(next)
	wg.Wait()

	var failures []result
	allowed := map[string]int{}
	same := 0
	for _, res := range results {
		if res.knot.err != "" || res.nsd.err != "" {
			t.Errorf("%v: a reference did not answer: knot %q nsd %q", res.q, res.knot.err, res.nsd.err)
			continue
		}
		if res.steer.equal(res.knot) || res.steer.equal(res.nsd) {
			same++
			continue
		}
		if why := allow(res); why != "" {
			allowed[why]++
			continue
		}
		failures = append(failures, res)
	}
	t.Logf("%d questions over %d signed zones: %d answered like Knot or NSD, %d allowed differences, %d failures",
		len(qs), len(zones), same, len(qs)-same-len(failures), len(failures))
	var whys []string
	for why, n := range allowed {
		whys = append(whys, fmt.Sprintf("%5d  %s", n, why))
	}
	sort.Strings(whys)
	for _, w := range whys {
		t.Log(w)
	}
	for i, f := range failures {
		if i == maxShown() {
			t.Errorf("... and %d more", len(failures)-i)
			break
		}
		t.Errorf("%v\nsteer:\n%sknot:\n%snsd:\n%s", f.q, f.steer, f.knot, f.nsd)
	}

	// The fast path's DO templates (RRSIGs from the zone) and its
	// hand-over of denials to the general path.
	t.Run("fast path matches general", func(t *testing.T) { fastMatchesGeneral(t, dnsserver.NewHandler(snap), qs, 5000) })
}
