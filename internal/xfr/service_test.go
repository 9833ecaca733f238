package xfr

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

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
