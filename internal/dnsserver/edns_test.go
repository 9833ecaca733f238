package dnsserver_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
)

// TestEDNS checks the response OPT and header flags for EDNS and flag
// variations of a positive query.
func TestEDNS(t *testing.T) {
	s := startServer(t, srvOpts{})
	positive := want{aa: true, answer: rrs(t, wwwA)}
	with := func(f func(w *want)) want {
		w := positive
		f(&w)
		return w
	}
	cases := []struct {
		name  string
		build func(m *dns.Msg)
		want  want
	}{
		{"advertises 1232", func(m *dns.Msg) { m.SetEdns0(4096, false) }, positive},
		{"advertises 1232 to a 512 client", func(m *dns.Msg) { m.SetEdns0(512, false) }, positive},
		{"advertises 1232 to a 65535 client", func(m *dns.Msg) { m.SetEdns0(65535, false) }, positive},
		{"unknown option ignored, not echoed", func(m *dns.Msg) {
			m.SetEdns0(4096, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 100}}
		}, positive},
		{"unknown option with data ignored", func(m *dns.Msg) {
			m.SetEdns0(4096, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65001, Data: []byte("hello")}}
		}, positive},
		{"DO echoed", func(m *dns.Msg) { m.SetEdns0(4096, true) }, with(func(w *want) { w.opt = &wantOPT{do: true} })},
		{"unknown EDNS flag not echoed", func(m *dns.Msg) {
			m.SetEdns0(4096, false)
			m.IsEdns0().Hdr.Ttl |= 0x0080
		}, positive},
		{"all unknown EDNS flags, DO echoed alone", func(m *dns.Msg) {
			m.SetEdns0(4096, true)
			m.IsEdns0().Hdr.Ttl |= 0x3FFF // every flag but DO and CO
		}, with(func(w *want) { w.opt = &wantOPT{do: true} })},
		{"all EDNS flags, DO and CO echoed", func(m *dns.Msg) {
			m.SetEdns0(4096, true)
			m.IsEdns0().Hdr.Ttl |= 0x7FFF // CO (RFC 9824) is known
		}, with(func(w *want) { w.opt = &wantOPT{do: true, co: true} })},
		{"Z bit cleared", func(m *dns.Msg) { m.Zero = true }, positive},
		{"Z bit cleared with EDNS", func(m *dns.Msg) { m.Zero = true; m.SetEdns0(1232, false) }, positive},
		{"RD copied", func(m *dns.Msg) { m.RecursionDesired = true }, positive},
		{"CD copied", func(m *dns.Msg) { m.CheckingDisabled = true }, positive},
		{"CD copied with DO", func(m *dns.Msg) { m.CheckingDisabled = true; m.SetEdns0(1232, true) }, with(func(w *want) { w.opt = &wantOPT{do: true} })},
		{"AD in query not set in response", func(m *dns.Msg) { m.AuthenticatedData = true }, positive},
		{"AA in query ignored", func(m *dns.Msg) { m.Authoritative = true }, positive},
		{"TC in query ignored", func(m *dns.Msg) { m.Truncated = true }, positive},
		{"RA in query not copied", func(m *dns.Msg) { m.RecursionAvailable = true }, positive},
		{"every header flag", func(m *dns.Msg) {
			m.Authoritative, m.Truncated, m.RecursionDesired, m.RecursionAvailable = true, true, true, true
			m.Zero, m.AuthenticatedData, m.CheckingDisabled = true, true, true
		}, positive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, tg := range targets(s) {
				for _, network := range networks {
					t.Run(tg.name+"/"+network, func(t *testing.T) {
						m := query("www.example.com.", dns.TypeA)
						c.build(m)
						r, _ := exchangeMsg(t, network, tg.addr, m)
						checkResponse(t, m, r, c.want)
					})
				}
			}
		})
	}
}

// TestBADVERS checks RFC 6891 §6.1.3: a query with an EDNS version above 0
// gets BADVERS (extended rcode 16: 0 in the header, 1 in the OPT) with an
// OPT of version 0 and no records.
func TestBADVERS(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, v := range []uint8{1, 2, 255} {
		for _, do := range []bool{false, true} {
			for _, tg := range targets(s) {
				for _, network := range networks {
					t.Run(fmt.Sprintf("version%d/do=%v/%s/%s", v, do, tg.name, network), func(t *testing.T) {
						m := query("www.example.com.", dns.TypeA)
						m.SetEdns0(4096, do)
						m.IsEdns0().SetVersion(v)
						m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_LOCAL{Code: 100}}
						r, wire := exchangeMsg(t, network, tg.addr, m)
						checkResponse(t, m, r, want{rcode: dns.RcodeBadVers, opt: &wantOPT{do: do}})
						if rc := wire[3] & 0xF; rc != 0 {
							t.Errorf("header rcode %d, want 0 (BADVERS is 16: all in the OPT)", rc)
						}
						if o := r.IsEdns0(); o != nil && o.Hdr.Ttl>>24 != 1 {
							t.Errorf("OPT extended rcode %d, want 1", o.Hdr.Ttl>>24)
						}
					})
				}
			}
		}
	}
	t.Run("kdig", func(t *testing.T) {
		r := dnstest.ParseKdig(t, dnstest.Kdig(t, s.V4, "+norec", "+edns=1", "www.example.com.", "A"))
		m := ednsQuery("www.example.com.", dns.TypeA, 1232)
		m.Id = r.Id
		checkResponse(t, m, r, want{rcode: dns.RcodeBadVers})
	})
}

const noEDNS = -1

// TestTruncation checks the UDP size limits: 512 bytes without EDNS or with
// an advertised size below 512, the client's size up to 1232 with EDNS; a
// response over the limit has TC set and no records at all (never part of
// an RRset), and the same query over TCP gets everything.
func TestTruncation(t *testing.T) {
	s := startServer(t, srvOpts{})
	txtCount := map[string]int{
		"medium.example.com.": 1, "big.example.com.": 3, "huge.example.com.": 6,
		"edge512.example.com.": 1, "edge513.example.com.": 1, "edge1232.example.com.": 1, "edge1233.example.com.": 1,
	}
	cases := []struct {
		name   string
		qname  string
		size   int  // advertised EDNS size; noEDNS means no OPT
		tc     bool // over UDP
		udpLen int  // exact UDP response length when not truncated (0: unchecked)
	}{
		{"512 exactly without EDNS", "edge512.example.com.", noEDNS, false, 512},
		{"513 without EDNS", "edge513.example.com.", noEDNS, true, 0},
		{"big without EDNS", "big.example.com.", noEDNS, true, 0},
		{"medium without EDNS", "medium.example.com.", noEDNS, false, 0},
		{"big with EDNS 1232", "big.example.com.", 1232, false, 683},
		{"big with EDNS 512", "big.example.com.", 512, true, 0},
		{"big with EDNS 100 (treated as 512)", "big.example.com.", 100, true, 0},
		{"medium with EDNS 100 (treated as 512)", "medium.example.com.", 100, false, 310},
		{"medium with EDNS 0 (treated as 512)", "medium.example.com.", 0, false, 0},
		{"edge512 with EDNS 512 (the OPT makes it 523)", "edge512.example.com.", 512, true, 0},
		{"1232 exactly with EDNS 4096", "edge1232.example.com.", 4096, false, 1232},
		{"1233 with EDNS 4096", "edge1233.example.com.", 4096, true, 0},
		{"1232 exactly with EDNS 1232", "edge1232.example.com.", 1232, false, 1232},
		{"1233 with EDNS 1233", "edge1233.example.com.", 1233, true, 0},
		{"1232 with EDNS 1231", "edge1232.example.com.", 1231, true, 0},
		{"huge with EDNS 4096", "huge.example.com.", 4096, true, 0},
		{"huge with EDNS 65535", "huge.example.com.", 65535, true, 0},
		{"huge without EDNS", "huge.example.com.", noEDNS, true, 0},
	}
	for _, c := range cases {
		for _, tg := range targets(s) {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				m := query(c.qname, dns.TypeTXT)
				if c.size != noEDNS {
					m.SetEdns0(uint16(c.size), false)
				}
				limit := 512
				if m.IsEdns0() != nil {
					limit = max(dnsserver.MinUDPSize, min(c.size, dnsserver.AdvertisedUDPSize))
				}
				r, wire := exchangeMsg(t, "udp", tg.addr, m)
				if len(wire) > limit {
					t.Errorf("UDP response is %d bytes, over the %d limit", len(wire), limit)
				}
				if c.tc {
					checkResponse(t, m, r, want{aa: true, tc: true})
				} else {
					checkResponse(t, m, r, want{aa: true, answer: rrStrings(r.Answer)})
					if len(r.Answer) != txtCount[c.qname] {
						t.Errorf("%d records over UDP, want %d", len(r.Answer), txtCount[c.qname])
					}
					if c.udpLen != 0 && len(wire) != c.udpLen {
						t.Errorf("UDP response is %d bytes, want exactly %d (has testdata changed?)", len(wire), c.udpLen)
					}
				}
				// Over TCP the answer is always complete.
				r2, _ := exchangeMsg(t, "tcp", tg.addr, m)
				checkResponse(t, m, r2, want{aa: true, answer: rrStrings(r2.Answer)})
				if len(r2.Answer) != txtCount[c.qname] {
					t.Errorf("%d records over TCP, want %d", len(r2.Answer), txtCount[c.qname])
				}
				if !c.tc && !sameSet(rrStrings(r.Answer), rrStrings(r2.Answer)) {
					t.Errorf("UDP and TCP answers differ")
				}
			})
		}
	}

	// kdig sees TC with +ignore, and by default retries over TCP.
	t.Run("kdig", func(t *testing.T) {
		out := dnstest.Kdig(t, s.V4, "+norec", "+ignore", "+bufsize=4096", "huge.example.com.", "TXT")
		r := dnstest.ParseKdig(t, out)
		m := ednsQuery("huge.example.com.", dns.TypeTXT, 4096)
		m.Id = r.Id
		checkResponse(t, m, r, want{aa: true, tc: true})
		out = dnstest.Kdig(t, s.V4, "+norec", "+bufsize=4096", "huge.example.com.", "TXT")
		r = dnstest.ParseKdig(t, out)
		if r.Truncated || len(r.Answer) != 6 {
			t.Errorf("kdig's TCP retry: TC %v, %d records; want the 6 records", r.Truncated, len(r.Answer))
		}
		if !strings.Contains(out, "(TCP)") {
			t.Errorf("kdig did not retry over TCP:\n%s", out)
		}
	})
}

// TestTruncationWireFormat checks the bytes of a truncated response: the
// header counts say one question, no records and (with EDNS) just the OPT.
func TestTruncationWireFormat(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, edns := range []bool{false, true} {
		m := query("huge.example.com.", dns.TypeTXT)
		if edns {
			m.SetEdns0(4096, false)
		}
		pkt, _ := m.Pack()
		wire := mustExchangeRaw(t, "udp", s.V4, pkt)
		ar := uint16(0)
		if edns {
			ar = 1
		}
		counts := [4]uint16{1, 0, 0, ar}
		for i := range counts {
			if got := binary.BigEndian.Uint16(wire[4+2*i:]); got != counts[i] {
				t.Errorf("edns=%v: count %d is %d, want %d", edns, i, got, counts[i])
			}
		}
		if wire[2]&0x02 == 0 {
			t.Errorf("edns=%v: TC clear", edns)
		}
	}
}

// TestTruncationAdditional checks what is left out first: additional
// address RRsets that do not fit are dropped without TC, the ones before
// them kept (RFC 2181 §9), but a referral whose glue does not fit is
// truncated (RFC 9471).
func TestTruncationAdditional(t *testing.T) {
	s := startServer(t, srvOpts{})
	cases := []struct {
		name           string
		qname          string
		qtype          uint16
		size           int // EDNS size, or noEDNS
		tc             bool
		answer, ns, ad int // records expected over UDP (OPT not counted)
		udpLen         int
		tcpRecords     int // in all three sections over TCP
	}{
		{"MX additional cut to the RRsets that fit without EDNS", "manymx.example.com.", dns.TypeMX, noEDNS, false, 10, 0, 12, 501, 30},
		{"MX additional kept with EDNS", "manymx.example.com.", dns.TypeMX, 1232, false, 10, 0, 20, 688, 30},
		{"referral glue does not fit: TC", "www.bigdeleg.example.com.", dns.TypeA, noEDNS, true, 0, 0, 0, 0, 24},
		{"referral glue fits with EDNS", "www.bigdeleg.example.com.", dns.TypeA, 1232, false, 0, 8, 16, 549, 24},
	}
	for _, c := range cases {
		for _, tg := range targets(s) {
			t.Run(c.name+"/"+tg.name, func(t *testing.T) {
				m := query(c.qname, c.qtype)
				if c.size != noEDNS {
					m.SetEdns0(uint16(c.size), false)
				}
				r, wire := exchangeMsg(t, "udp", tg.addr, m)
				extra := rrStrings(r.Extra)
				if r.Truncated != c.tc || len(r.Answer) != c.answer || len(r.Ns) != c.ns || len(extra) != c.ad {
					t.Errorf("TC %v, %d/%d/%d records; want TC %v, %d/%d/%d", r.Truncated, len(r.Answer), len(r.Ns), len(extra),
						c.tc, c.answer, c.ns, c.ad)
				}
				if c.udpLen != 0 && len(wire) != c.udpLen {
					t.Errorf("UDP response is %d bytes, want %d (has testdata changed?)", len(wire), c.udpLen)
				}
				if !c.tc {
					checkResponse(t, m, r, want{aa: c.answer > 0, answer: rrStrings(r.Answer), ns: rrStrings(r.Ns), extra: extra})
				} else {
					checkResponse(t, m, r, want{tc: true})
				}
				// TCP has everything.
				r2, _ := exchangeMsg(t, "tcp", tg.addr, m)
				n := len(r2.Answer) + len(r2.Ns) + len(rrStrings(r2.Extra))
				if r2.Truncated || n != c.tcpRecords {
					t.Errorf("TCP: TC %v, %d records; want %d", r2.Truncated, n, c.tcpRecords)
				}
			})
		}
	}
}
