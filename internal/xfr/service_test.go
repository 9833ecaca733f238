package xfr

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/tsig"
)

// TestServiceSerials: the service exports a zone under its file's serial;
// when the fallback of a steered name moves without a new serial it asks
// for a rebuild with the next serial (the old export serving meanwhile),
// publishes and journals it once served, keeps it in SerialsFile so that
// a new service starts from it; over UDP an IXFR gets the SOA only from
// an address and key its secondaries entry holds; and the metrics say so.
func TestServiceSerials(t *testing.T) {
	const origin = "svc.example."
	key := tsig.Key{Name: "svc-key.", Algorithm: dns.HmacSHA256, Secret: "c3ZjIHRlc3Qga2V5IG9mIHRoaXJ0eS10d28gYnl0ZXMh"}
	soa := func(serial uint32) *dns.SOA { return soaAt(t, serial) }
	records := func(serial uint32) func([]dns.RR) []dns.RR {
		return func(dst []dns.RR) []dns.RR {
			return append(dst, soa(serial), mustRR(t, origin+" 300 IN NS ns1."+origin), mustRR(t, "ns1."+origin+" 300 IN A 192.0.2.53"))
		}
	}
	fallback := func(addr string) []dns.RR { return []dns.RR{mustRR(t, "shop."+origin+" 30 IN A "+addr)} }
	type version struct{ serial uint32 } // what a *zone.Zone is to the node
	v1, v2 := &version{1}, &version{2}

	var mu sync.Mutex
	zones := []Zone{{Origin: "other.example.", Serial: 7, FileSerial: 7}}
	served := func(z Zone) {
		mu.Lock()
		defer mu.Unlock()
		zones = append(zones[:1], z)
	}
	var rebuilds []string
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	s := New(Options{
		Dir:        dir,
		Registerer: reg,
		Zones: func() []Zone {
			mu.Lock()
			defer mu.Unlock()
			return append([]Zone(nil), zones...)
		},
		Rebuild: func(why string) { rebuilds = append(rebuilds, why) },
	})
	defer s.Close()
	out := []Secondary{{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Key: key}}
	zone := func(serial uint32, v *version, fb string) Zone {
		return Zone{Origin: origin, Serial: serial, SOA: soa(serial), FileSerial: 1, Secondaries: out, Journal: 5,
			Version: v, Records: records(serial), Fallbacks: fallback(fb)}
	}

	served(zone(1, v1, "198.51.100.2"))
	s.Refresh()
	if st := s.Status(origin); !st.Exported || st.ExportedSerial != 1 || len(rebuilds) != 0 {
		t.Fatalf("first export: %+v, rebuilds %v", st, rebuilds)
	}
	// The fallback moves, the file's serial does not.
	served(zone(1, v1, "198.51.100.1"))
	s.Refresh()
	if len(rebuilds) != 1 || rebuilds[0] != "zone serial" || s.Serials()[origin] != 2 {
		t.Fatalf("after the fallback moved: rebuilds %v, serials %v", rebuilds, s.Serials())
	}
	if st := s.Status(origin); st.ExportedSerial != 1 {
		t.Errorf("before the rebuild is served: exported serial %d, want the last consistent 1", st.ExportedSerial)
	}
	// The rebuild serves serial 2.
	served(zone(2, v2, "198.51.100.1"))
	s.Refresh()
	if st := s.Status(origin); st.ExportedSerial != 2 || st.Journal != 1 || len(rebuilds) != 1 {
		t.Fatalf("after the rebuild: %+v, rebuilds %v", st, rebuilds)
	}
	var saved map[string]savedSerial
	if b, err := os.ReadFile(filepath.Join(dir, SerialsFile)); err != nil || json.Unmarshal(b, &saved) != nil || saved[origin].Serial != 2 {
		t.Fatalf("%s: %v %v", SerialsFile, saved, err)
	}
	if again := New(Options{Dir: dir}); again.Serials()[origin] != 2 {
		t.Errorf("a new service starts with serials %v, want %s at 2", again.Serials(), origin)
	} else {
		again.Close()
	}

	ixfr := func(from, key string) *dns.Msg {
		m := new(dns.Msg)
		m.SetIxfr(origin, 1, "", "")
		return s.Answer(m, netip.MustParseAddr(from), key)
	}
	if r := ixfr("192.0.2.9", key.Name); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != 2 {
		t.Errorf("IXFR over UDP, allowed: %v", r)
	}
	for _, c := range [][2]string{{"192.0.2.9", ""}, {"198.51.100.9", key.Name}, {"192.0.2.9", "other-key."}} {
		if r := ixfr(c[0], c[1]); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("IXFR over UDP from %s with key %q: %v, want REFUSED", c[0], c[1], r)
		}
	}
	n := new(dns.Msg)
	n.SetNotify(origin)
	if r := s.Answer(n, netip.MustParseAddr("192.0.2.9"), ""); r.Rcode != dns.RcodeNotAuth {
		t.Errorf("NOTIFY for a zone that is not a secondary here: %v, want NOTAUTH", r)
	}

	// gathered returns each series of reg as name{label="value",...} value.
	gathered := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
			}
		}
		return out
	}
	got := gathered()
	for series, want := range map[string]float64{
		`steer_zone_serial{zone="other.example."}`:                                                     7,
		`steer_zone_serial{zone="svc.example."}`:                                                       2,
		`steer_zone_transfers_total{direction="out",result="ok",type="ixfr",zone="svc.example."}`:      1,
		`steer_zone_transfers_total{direction="out",result="refused",type="ixfr",zone="svc.example."}`: 3,
		`steer_notify_total{direction="received",result="refused",zone="svc.example."}`:                1,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s: %v (present %v), want %v", series, v, ok, want)
		}
	}
}

// fakeAgreement is a fleet's agreement as the service sees it.
type fakeAgreement struct {
	mu      sync.Mutex
	calls   int
	sum     string // the content of the last Agree
	give    uint32 // what Agree answers (0: fails)
	agreedS uint32 // what Agreed answers
	agreedD string
}

func (f *fakeAgreement) Agree(origin, sum string, proposed uint32) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.sum = sum
	if f.give == 0 {
		return 0, errors.New("store unreachable")
	}
	return f.give, nil
}

func (f *fakeAgreement) Agreed(origin string) (uint32, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agreedS, f.agreedD, f.agreedS != 0
}

// TestServiceAgreement: in a fleet, a new export takes the serial the
// fleet agrees (once per change: the Refresh after the rebuild does not
// ask again), a newer serial the fleet agreed for the same content is
// taken, and with the store unreachable the node exports its own next
// serial without waiting for the store again at once.
func TestServiceAgreement(t *testing.T) {
	const origin = "agree.example."
	key := tsig.Key{Name: "svc-key.", Algorithm: dns.HmacSHA256, Secret: "c3ZjIHRlc3Qga2V5IG9mIHRoaXJ0eS10d28gYnl0ZXMh"}
	v := &struct{}{}
	var mu sync.Mutex
	var zones []Zone
	served := func(serial uint32, fb string) {
		mu.Lock()
		defer mu.Unlock()
		soa := soaAt(t, serial)
		soa.Hdr.Name = origin
		zones = []Zone{{Origin: origin, Serial: serial, SOA: soa, FileSerial: 1, Journal: 5, Version: v,
			Secondaries: []Secondary{{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Key: key}},
			Records: func(dst []dns.RR) []dns.RR {
				return append(dst, soa, mustRR(t, origin+" 300 IN NS ns1."+origin), mustRR(t, "ns1."+origin+" 300 IN A 192.0.2.53"))
			},
			Fallbacks: []dns.RR{mustRR(t, "shop."+origin+" 30 IN A "+fb)}}}
	}
	ag := &fakeAgreement{give: 5}
	s := New(Options{Agreement: ag, Zones: func() []Zone {
		mu.Lock()
		defer mu.Unlock()
		return append([]Zone(nil), zones...)
	}})
	defer s.Close()
	exported := func() uint32 { return s.Status(origin).ExportedSerial }

	served(1, "198.51.100.1")
	s.Refresh()
	if s.Serials()[origin] != 5 || ag.calls != 1 {
		t.Fatalf("first export: serials %v, %d agreements", s.Serials(), ag.calls)
	}
	served(5, "198.51.100.1") // the rebuild
	s.Refresh()
	if exported() != 5 || ag.calls != 1 {
		t.Fatalf("after the rebuild: exported %d, %d agreements (want 5, 1)", exported(), ag.calls)
	}
	// Another node moved the fleet on and back: the same content, serial 7.
	ag.mu.Lock()
	ag.agreedS, ag.agreedD = 7, ag.sum
	ag.mu.Unlock()
	s.Refresh()
	if s.Serials()[origin] != 7 {
		t.Fatalf("the fleet's newer serial for the same content: serials %v", s.Serials())
	}
	served(7, "198.51.100.1")
	s.Refresh()
	if exported() != 7 || ag.calls != 1 {
		t.Fatalf("exported %d, %d agreements (want 7, 1)", exported(), ag.calls)
	}
	// The store is unreachable: the node's own next serial, and no new
	// try for the next change at once.
	ag.mu.Lock()
	ag.give = 0
	ag.mu.Unlock()
	served(7, "198.51.100.2")
	s.Refresh()
	served(8, "198.51.100.2")
	s.Refresh()
	if exported() != 8 || ag.calls != 2 {
		t.Fatalf("store down: exported %d, %d agreements (want 8, 2)", exported(), ag.calls)
	}
	served(8, "198.51.100.3")
	s.Refresh()
	if s.Serials()[origin] != 9 || ag.calls != 2 {
		t.Fatalf("store down, next change: serials %v, %d agreements (want 9, 2)", s.Serials(), ag.calls)
	}
}

// TestSignedExportDigest: in a fleet, two nodes' signed exports of the
// same records and keys have one digest although each signed them at its
// own time (inception, expiration, signature octets), so they agree one
// serial; a renewal moving the earliest expiration into the next period,
// a signature by another key or a changed record is a new digest; a node
// alone digests the signatures whole. Such an export keeps no IXFR
// journal in a fleet (a delta would not apply to another node's copy).
func TestSignedExportDigest(t *testing.T) {
	const origin = "signed.example."
	const period = 3600
	base := uint32(1_800_000_000/period*period + 100) // early in a period
	soa := soaAt(t, 1)
	soa.Hdr.Name = origin
	sig := func(name string, covered uint16, tag uint16, inc, exp uint32, octets string) *dns.RRSIG {
		return &dns.RRSIG{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 300},
			TypeCovered: covered, Algorithm: dns.ECDSAP256SHA256, Labels: 2, OrigTtl: 300, KeyTag: tag,
			SignerName: origin, Inception: inc, Expiration: exp, Signature: octets}
	}
	// export is one node's signed export: signed at at (the apex NS
	// expiring first), its octets, the key tag, the address of www.
	export := func(at uint32, octets string, tag uint16, www string) Zone {
		rrs := []dns.RR{soa,
			sig(origin, dns.TypeSOA, tag, at+17, at+5000, octets+"S"),
			mustRR(t, origin+" 300 IN NS ns1."+origin),
			sig(origin, dns.TypeNS, tag, at, at+1000, octets+"N"),
			mustRR(t, "www."+origin+" 300 IN A "+www),
			sig("www."+origin, dns.TypeA, tag, at, at+2000, octets+"W"),
		}
		return Zone{Origin: origin, SOA: soa, Version: &struct{ int }{}, SigPeriod: period * time.Second,
			Records: func(dst []dns.RR) []dns.RR { return append(dst, rrs...) }}
	}
	fleet := New(Options{Agreement: &fakeAgreement{give: 1}})
	defer fleet.Close()
	alone := New(Options{})
	defer alone.Close()
	a := export(base, "AAAA", 1, "192.0.2.1")
	b := export(base+40, "BBBB", 1, "192.0.2.1") // another node, 40 s later
	if fleet.sum(&a) != fleet.sum(&b) {
		t.Error("in a fleet, the same records signed by two nodes have two digests")
	}
	if alone.sum(&a) == alone.sum(&b) {
		t.Error("a node alone digests signatures made at another time the same")
	}
	for what, z := range map[string]Zone{
		"renewed into the next period": export(base+period, "AAAA", 1, "192.0.2.1"),
		"signed by another key":        export(base, "AAAA", 2, "192.0.2.1"),
		"a changed record":             export(base, "AAAA", 1, "192.0.2.2"),
	} {
		if fleet.sum(&a) == fleet.sum(&z) {
			t.Errorf("%s: the same digest", what)
		}
	}

	// No journal in a fleet: the new serial is answered AXFR-style.
	key := tsig.Key{Name: "svc-key.", Algorithm: dns.HmacSHA256, Secret: "c3ZjIHRlc3Qga2V5IG9mIHRoaXJ0eS10d28gYnl0ZXMh"}
	for _, s := range []*Service{fleet, alone} {
		z := a
		z.Journal, z.Serial, z.FileSerial = 5, 1, 1
		z.Secondaries = []Secondary{{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Key: key}}
		s.o.Zones = func() []Zone { return []Zone{z} }
		s.Refresh()
		if got := s.state[origin].journal != nil; got != (s == alone) {
			t.Errorf("journal kept %v (alone %v)", got, s == alone)
		}
	}
}

// TestServiceFixedSerial: a zone signed elsewhere (Fixed) is exported
// under its signer's serial whatever changes under it: no rebuild for a
// serial of steer's, no agreement with the fleet; a signer's serial older
// than the one last exported is said.
func TestServiceFixedSerial(t *testing.T) {
	const origin = "fixed.example."
	key := tsig.Key{Name: "svc-key.", Algorithm: dns.HmacSHA256, Secret: "c3ZjIHRlc3Qga2V5IG9mIHRoaXJ0eS10d28gYnl0ZXMh"}
	records := func(serial uint32) func([]dns.RR) []dns.RR {
		return func(dst []dns.RR) []dns.RR {
			return append(dst, soaAt(t, serial), mustRR(t, origin+" 300 IN NS ns1."+origin), mustRR(t, "ns1."+origin+" 300 IN A 192.0.2.53"))
		}
	}
	var mu sync.Mutex
	var zones []Zone
	var rebuilds []string
	var logs strings.Builder
	ag := &fakeAgreement{give: 99}
	s := New(Options{
		Log:       slog.New(slog.NewTextHandler(&logs, nil)),
		Agreement: ag,
		Zones: func() []Zone {
			mu.Lock()
			defer mu.Unlock()
			return append([]Zone(nil), zones...)
		},
		Rebuild: func(why string) { rebuilds = append(rebuilds, why) },
	})
	defer s.Close()
	type version struct{ n int }
	serve := func(serial uint32, v *version, fb string) {
		mu.Lock()
		defer mu.Unlock()
		zones = []Zone{{Origin: origin, Serial: serial, SOA: soaAt(t, serial), FileSerial: serial, Fixed: true,
			Secondaries: []Secondary{{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Key: key}}, Journal: 5,
			Version: v, Records: records(serial), Fallbacks: []dns.RR{mustRR(t, "shop."+origin+" 30 IN A "+fb)}}}
	}
	v1 := &version{1}
	serve(5, v1, "198.51.100.1")
	s.Refresh()
	serve(5, v1, "198.51.100.2") // content moves, the signer's serial does not
	s.Refresh()
	if st := s.Status(origin); st.ExportedSerial != 5 || len(rebuilds) != 0 || len(s.Serials()) != 0 || ag.calls != 0 {
		t.Errorf("exported %d, rebuilds %v, serials %v, agreements %d; want the signer's 5 and none", st.ExportedSerial, rebuilds, s.Serials(), ag.calls)
	}
	serve(3, &version{2}, "198.51.100.2") // an older serial from the signer
	s.Refresh()
	if st := s.Status(origin); st.ExportedSerial != 3 || !strings.Contains(logs.String(), "the signer's serial is older than the one last exported") {
		t.Errorf("exported %d; log:\n%s", st.ExportedSerial, logs.String())
	}
	// The signer's records alone are the same on every node: a delta
	// applies to any copy, so the journal is kept. With signatures of
	// this node's own in it (a multi-signer zone's steered names), a
	// fleet answers AXFR-style: another node's copy of the serial holds
	// other signatures.
	if s.state[origin].journal == nil {
		t.Error("a Fixed zone without signatures of the node's own keeps no journal in a fleet")
	}
	mu.Lock()
	zones[0].NodeSigned, zones[0].Serial, zones[0].FileSerial, zones[0].SOA = true, 7, 7, soaAt(t, 7)
	zones[0].Records, zones[0].Version = records(7), &version{3}
	mu.Unlock()
	s.Refresh()
	if st := s.Status(origin); st.ExportedSerial != 7 || s.state[origin].journal != nil {
		t.Errorf("exported %d, journal kept %v; want 7 answered AXFR-style", st.ExportedSerial, s.state[origin].journal != nil)
	}
}
