package dnsserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
)

// The records of testdata/example.com.zone the answers below are made of.
const (
	soaRR     = "example.com. 3600 IN SOA ns1.example.com. hostmaster.example.com. 2024060101 7200 3600 1209600 300"
	negSOA    = "example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 2024060101 7200 3600 1209600 300"
	ns1A      = "ns1.example.com. 3600 IN A 192.0.2.53"
	ns1AAAA   = "ns1.example.com. 3600 IN AAAA 2001:db8::53"
	ns2A      = "ns2.example.com. 3600 IN A 198.51.100.53"
	mailA     = "mail.example.com. 3600 IN A 192.0.2.25"
	mailAAAA  = "mail.example.com. 3600 IN AAAA 2001:db8::25"
	wwwA      = "www.example.com. 600 IN A 192.0.2.80"
	wwwAAAA   = "www.example.com. 600 IN AAAA 2001:db8::80"
	subNS1    = "sub.example.com. 86400 IN NS ns1.sub.example.com."
	subNS2    = "sub.example.com. 86400 IN NS ns2.sub.example.com."
	subGlueA  = "ns1.sub.example.com. 3600 IN A 192.0.2.201"
	subGlue6  = "ns2.sub.example.com. 3600 IN AAAA 2001:db8::202"
	subDS     = "sub.example.com. 3600 IN DS 12345 13 2 2BB183AF5F22588179A53B0A98631FAD1A292118B5C5E2CA2C8F4C8C0D4E1F6A"
	apexNS1   = "example.com. 3600 IN NS ns1.example.com."
	apexNS2   = "example.com. 3600 IN NS ns2.example.com."
	legacyDN  = "legacy.example.com. 7200 IN DNAME modern.example.com."
	staticA   = "static.example.com. 300 IN A 192.0.2.81"
	identTXT  = `id.server. 0 CH TXT "steer-test"`
	hostnTXT  = `hostname.bind. 0 CH TXT "steer-test"`
	sipSRV    = "_sip._tcp.example.com. 1800 IN SRV 10 5 5060 sip.example.com."
	sipA      = "sip.example.com. 3600 IN A 192.0.2.60"
	apexMX    = "example.com. 3600 IN MX 10 mail.example.com."
	apexTXT   = `example.com. 3600 IN TXT "v=spf1 mx -all"`
	apexCAA   = `example.com. 3600 IN CAA 0 issue "letsencrypt.org"`
	aliasCN   = "alias.example.com. 120 IN CNAME alias2.example.com."
	alias2CN  = "alias2.example.com. 180 IN CNAME www.example.com."
	hostEntA  = "host.ent.example.com. 3600 IN A 192.0.2.90"
	modernA   = "host.modern.example.com. 3600 IN A 192.0.2.110"
	legacyCN  = "host.legacy.example.com. 7200 IN CNAME host.modern.example.com."
	wildSynA  = "foo.wild.example.com. 900 IN A 192.0.2.100"
	wildSynTX = `a.b.wild.example.com. 900 IN TXT "wildcard"`
)

// answerCase is one query and its complete expected answer.
type answerCase struct {
	name   string
	qname  string
	qtype  uint16
	qclass uint16 // 0 means IN
	rcode  int
	aa     bool
	answer []string
	ns     []string
	extra  []string
	fold   bool   // compare case-insensitively (names follow the query's case)
	ede    string // the Extended DNS Error with EDNS (want.ede)
}

var answerCases = []answerCase{
	{name: "A", qname: "www.example.com.", qtype: dns.TypeA, aa: true, answer: []string{wwwA}},
	{name: "AAAA", qname: "www.example.com.", qtype: dns.TypeAAAA, aa: true, answer: []string{wwwAAAA}},
	{name: "apex SOA", qname: "example.com.", qtype: dns.TypeSOA, aa: true, answer: []string{soaRR}},
	{name: "apex TXT", qname: "example.com.", qtype: dns.TypeTXT, aa: true, answer: []string{apexTXT}},
	{name: "apex CAA", qname: "example.com.", qtype: dns.TypeCAA, aa: true, answer: []string{apexCAA}},
	{name: "NXDOMAIN", qname: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{negSOA}},
	{name: "NXDOMAIN below a name", qname: "a.b.www.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{negSOA}},
	{name: "NODATA", qname: "www.example.com.", qtype: dns.TypeMX, aa: true, ns: []string{negSOA}},
	{name: "NODATA apex", qname: "example.com.", qtype: dns.TypeAAAA, aa: true, ns: []string{negSOA}},
	{name: "empty non-terminal", qname: "ent.example.com.", qtype: dns.TypeA, aa: true, ns: []string{negSOA}},
	{name: "empty non-terminal SRV parent", qname: "_tcp.example.com.", qtype: dns.TypeSRV, aa: true, ns: []string{negSOA}},
	{name: "below empty non-terminal", qname: "host.ent.example.com.", qtype: dns.TypeA, aa: true, answer: []string{hostEntA}},
	{name: "CNAME chain", qname: "alias.example.com.", qtype: dns.TypeA, aa: true, answer: []string{aliasCN, alias2CN, wwwA}},
	{name: "CNAME chain to NODATA", qname: "alias.example.com.", qtype: dns.TypeMX, aa: true, answer: []string{aliasCN, alias2CN}, ns: []string{negSOA}},
	{name: "CNAME asked for", qname: "alias.example.com.", qtype: dns.TypeCNAME, aa: true, answer: []string{aliasCN}},
	{name: "wildcard", qname: "foo.wild.example.com.", qtype: dns.TypeA, aa: true, answer: []string{wildSynA}},
	{name: "wildcard two labels down", qname: "a.b.wild.example.com.", qtype: dns.TypeTXT, aa: true, answer: []string{wildSynTX}},
	{name: "wildcard NODATA", qname: "foo.wild.example.com.", qtype: dns.TypeMX, aa: true, ns: []string{negSOA}},
	{name: "wildcard parent is empty non-terminal", qname: "wild.example.com.", qtype: dns.TypeA, aa: true, ns: []string{negSOA}},
	{name: "referral at the cut", qname: "sub.example.com.", qtype: dns.TypeA, ns: []string{subNS1, subNS2}, extra: []string{subGlueA, subGlue6}},
	{name: "referral below the cut", qname: "www.sub.example.com.", qtype: dns.TypeA, ns: []string{subNS1, subNS2}, extra: []string{subGlueA, subGlue6}},
	{name: "referral for NS at the cut", qname: "sub.example.com.", qtype: dns.TypeNS, ns: []string{subNS1, subNS2}, extra: []string{subGlueA, subGlue6}},
	{name: "referral for glue name", qname: "ns1.sub.example.com.", qtype: dns.TypeA, ns: []string{subNS1, subNS2}, extra: []string{subGlueA, subGlue6}},
	{name: "DS at the cut", qname: "sub.example.com.", qtype: dns.TypeDS, aa: true, answer: []string{subDS}},
	{name: "DS below the cut", qname: "x.sub.example.com.", qtype: dns.TypeDS, ns: []string{subNS1, subNS2}, extra: []string{subGlueA, subGlue6}},
	{name: "MX additional", qname: "example.com.", qtype: dns.TypeMX, aa: true, answer: []string{apexMX}, extra: []string{mailA, mailAAAA}},
	{name: "SRV additional", qname: "_sip._tcp.example.com.", qtype: dns.TypeSRV, aa: true, answer: []string{sipSRV}, extra: []string{sipA}},
	{name: "NS additional", qname: "example.com.", qtype: dns.TypeNS, aa: true, answer: []string{apexNS1, apexNS2}, extra: []string{ns1A, ns1AAAA, ns2A}},
	{name: "DNAME", qname: "host.legacy.example.com.", qtype: dns.TypeA, aa: true, answer: []string{legacyDN, legacyCN, modernA}},
	{name: "DNAME owner itself", qname: "legacy.example.com.", qtype: dns.TypeDNAME, aa: true, answer: []string{legacyDN}},
	{name: "REFUSED outside the zones", qname: "example.org.", qtype: dns.TypeA, rcode: dns.RcodeRefused, ede: "20"},
	{name: "REFUSED parent of the zone", qname: "com.", qtype: dns.TypeSOA, rcode: dns.RcodeRefused, ede: "20"},
	{name: "REFUSED class HS", qname: "example.com.", qtype: dns.TypeSOA, qclass: dns.ClassHESIOD, rcode: dns.RcodeRefused, ede: "21"},
	// Names in the answer compress into the question, so they come back in
	// the case the client used (as BIND and Knot do): compare folded.
	{name: "question case preserved", qname: "ExAmPle.CoM.", qtype: dns.TypeSOA, aa: true, answer: []string{soaRR}, fold: true},
	{name: "question case preserved NXDOMAIN", qname: "No.WWW.eXaMpLe.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{negSOA}, fold: true},
	{name: "question case preserved CNAME chain", qname: "ALIAS.example.COM.", qtype: dns.TypeA, aa: true, answer: []string{aliasCN, alias2CN, wwwA}, fold: true},
}

func (c answerCase) want(t testing.TB) want {
	return want{
		rcode: c.rcode, aa: c.aa,
		answer: rrs(t, c.answer...), ns: rrs(t, c.ns...), extra: rrs(t, c.extra...),
		ede: c.ede,
	}
}

func (c answerCase) query(edns bool) *dns.Msg {
	m := query(c.qname, c.qtype)
	if c.qclass != 0 {
		m.Question[0].Qclass = c.qclass
	}
	if edns {
		m.SetEdns0(dnsserver.AdvertisedUDPSize, false)
	}
	return m
}

// TestAnswers asks every case over UDP and TCP, IPv4 and IPv6, with the
// miekg/dns client (with and without EDNS) and with kdig, and checks the
// whole response each time.
func TestAnswers(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, c := range answerCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, tg := range targets(s) {
				for _, network := range []string{"udp", "tcp"} {
					for _, edns := range []bool{false, true} {
						name := tg.name + "/" + network + "/miekg"
						if edns {
							name += "+edns"
						}
						t.Run(name, func(t *testing.T) {
							q := c.query(edns)
							r := dnstest.Exchange(t, network, tg.addr, q)
							if c.fold {
								if len(r.Answer) > 0 && r.Answer[0].Header().Name != c.qname {
									t.Errorf("answer owner %q, want the query's case %q", r.Answer[0].Header().Name, c.qname)
								}
								foldSections(t, r)
							}
							checkResponse(t, q, r, c.want(t))
						})
					}
					t.Run(tg.name+"/"+network+"/kdig", func(t *testing.T) {
						args := []string{"+norec"}
						if network == "tcp" {
							args = append(args, "+tcp")
						}
						if c.qclass != 0 {
							args = append(args, "-c", fmt.Sprintf("CLASS%d", c.qclass))
						}
						args = append(args, c.qname, dns.TypeToString[c.qtype])
						out := dnstest.Kdig(t, tg.addr, args...)
						r := dnstest.ParseKdig(t, out)
						// kdig lower-cases the name it is given, so its question
						// is the lower-case one (case preservation itself is
						// checked with miekg/dns above).
						q := c.query(false)
						q.Question[0].Name = strings.ToLower(q.Question[0].Name)
						q.Id = r.Id
						checkResponse(t, q, r, c.want(t))
					})
				}
			}
		})
	}
}

// foldSections lower-cases every record of r's sections.
func foldSections(t testing.TB, r *dns.Msg) {
	t.Helper()
	fold := func(rrs []dns.RR) {
		for i, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			n, err := dns.NewRR(strings.ToLower(rr.String()))
			if err != nil {
				t.Fatal(err)
			}
			rrs[i] = n
		}
	}
	fold(r.Answer)
	fold(r.Ns)
	fold(r.Extra)
}
