package dnsserver_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// longDNAME is a DNAME whose target is long enough that a long name below
// it cannot be substituted within 255 octets.
var longDNAME = "long 300 DNAME " + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 60) + ".example.com.\n"

// handlerWithZone builds a Handler for the test zone with extra records
// appended.
func handlerWithZone(tb testing.TB, extra string) *dnsserver.Handler {
	tb.Helper()
	files := testFiles(tb, srvOpts{})
	files["example.com.zone"] += extra
	dir := tb.TempDir()
	dnstest.WriteFiles(tb, dir, files)
	cfg, err := config.Load(filepath.Join(dir, "steer.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return dnsserver.NewHandler(snap)
}

// TestExtendedErrors checks the Extended DNS Errors (RFC 8914) steer sends
// with EDNS: 20 (Not Authoritative) with the REFUSED for a name outside
// every zone, as Knot and NSD do; 18 (Prohibited) with a refused zone
// transfer and 21 (Not Supported) with a refused CHAOS or other class
// query, as NSD does; and 0 (Other) with a reason with the YXDOMAIN of a
// DNAME substitution that overflows, as NSD does; none
// without EDNS, and none with other answers. Fast and general path agree.
func TestExtendedErrors(t *testing.T) {
	h := handlerWithZone(t, longDNAME)
	tooLong := strings.Repeat("x", 60) + ".long.example.com."
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		qclass uint16
		rcode  int
		ede    string
	}{
		{"outside the zones", "example.org.", dns.TypeA, dns.ClassINET, dns.RcodeRefused, "20"},
		{"parent of the zone", "com.", dns.TypeSOA, dns.ClassINET, dns.RcodeRefused, "20"},
		{"root", ".", dns.TypeNS, dns.ClassINET, dns.RcodeRefused, "20"},
		{"DNAME overflow", tooLong, dns.TypeA, dns.ClassINET, dns.RcodeYXDomain, "0:DNAME substitution too long"},
		{"answer", "www.example.com.", dns.TypeA, dns.ClassINET, dns.RcodeSuccess, ""},
		{"NXDOMAIN", "nx.example.com.", dns.TypeA, dns.ClassINET, dns.RcodeNameError, ""},
		{"zone transfer refused", "example.com.", dns.TypeAXFR, dns.ClassINET, dns.RcodeRefused, "18"},
		{"IXFR refused", "example.com.", dns.TypeIXFR, dns.ClassINET, dns.RcodeRefused, "18"},
		{"CHAOS name not served", "foo.bind.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, "21"},
		{"CHAOS type not served", "id.server.", dns.TypeA, dns.ClassCHAOS, dns.RcodeRefused, "21"},
		{"CHAOS identity", "id.server.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeSuccess, ""},
		{"HESIOD class", "example.com.", dns.TypeA, dns.ClassHESIOD, dns.RcodeRefused, "21"},
	}
	from := netip.MustParseAddr("192.0.2.150")
	for _, c := range cases {
		for _, edns := range []bool{false, true} {
			for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
				m := query(c.qname, c.qtype)
				m.Question[0].Qclass = c.qclass
				if edns {
					m.SetEdns0(1232, false)
				}
				req, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				fast := h.HandleFrom(req, tr, from, make([]byte, 0, 65535))
				general := h.HandleGeneral(req, tr, from, make([]byte, 0, 65535))
				if !bytes.Equal(fast, general) {
					t.Errorf("%s edns=%v %v: fast and general differ", c.name, edns, tr)
				}
				r := new(dns.Msg)
				if err := r.Unpack(general); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if r.Rcode != c.rcode {
					t.Errorf("%s edns=%v: rcode %s, want %s", c.name, edns, rcodeName(r.Rcode), rcodeName(c.rcode))
				}
				var got []string
				if o := r.IsEdns0(); o != nil {
					for _, opt := range o.Option {
						if e, ok := opt.(*dns.EDNS0_EDE); ok {
							got = append(got, edeString(e))
						}
					}
				}
				var want []string
				if edns && c.ede != "" {
					want = []string{c.ede}
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("%s edns=%v %v: EDE %q, want %q", c.name, edns, tr, got, want)
				}
			}
		}
	}
}

// edeString writes e as want.ede does: "code" or "code:extra text".
func edeString(e *dns.EDNS0_EDE) string {
	if e.ExtraText != "" {
		return fmt.Sprintf("%d:%s", e.InfoCode, e.ExtraText)
	}
	return fmt.Sprint(e.InfoCode)
}
