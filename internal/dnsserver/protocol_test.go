package dnsserver_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
)

var networks = []string{"udp", "tcp"}

// TestOpcodes sends every opcode but QUERY and expects NOTIMP echoing only
// the ID and the opcode: no question, no records, no flag but QR (not even
// RD, which the queries set).
func TestOpcodes(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, op := range []int{dns.OpcodeIQuery, dns.OpcodeStatus, 3, dns.OpcodeNotify, dns.OpcodeUpdate, 6, 15} {
		name := dns.OpcodeToString[op]
		if name == "" {
			name = fmt.Sprintf("opcode%d", op)
		}
		t.Run(name, func(t *testing.T) {
			for _, tg := range targets(s) {
				for _, network := range networks {
					t.Run(tg.name+"/"+network, func(t *testing.T) {
						m := query("example.com.", dns.TypeSOA)
						m.Opcode = op
						m.RecursionDesired = true
						m.CheckingDisabled = true
						m.AuthenticatedData = true
						if op == dns.OpcodeNotify {
							m.Authoritative = true
							m.Answer = []dns.RR{mustRR(t, soaRR)}
						}
						if op == dns.OpcodeUpdate {
							m.Ns = []dns.RR{mustRR(t, "new.example.com. 300 IN A 192.0.2.1")}
						}
						pkt, err := m.Pack()
						if err != nil {
							t.Fatal(err)
						}
						resp := mustExchangeRaw(t, network, tg.addr, pkt)
						checkHeaderOnly(t, resp, m.Id, op, dns.RcodeNotImplemented)
					})
				}
			}
		})
	}
}

// checkHeaderOnly asserts resp is a 12-byte header with ID id, QR set,
// opcode op, rcode rcode, no other flag and all counts zero.
func checkHeaderOnly(t testing.TB, resp []byte, id uint16, op, rcode int) {
	t.Helper()
	if len(resp) != 12 {
		t.Fatalf("response is %d bytes, want a bare 12-byte header", len(resp))
	}
	if got := binary.BigEndian.Uint16(resp); got != id {
		t.Errorf("id = %d, want %d", got, id)
	}
	want2 := byte(0x80 | op<<3) // QR, opcode; AA, TC, RD clear
	if resp[2] != want2 {
		t.Errorf("flags byte 2 = %08b, want %08b (QR, opcode %d, nothing else)", resp[2], want2, op)
	}
	if resp[3] != byte(rcode) {
		t.Errorf("flags byte 3 = %08b, want %08b (RA, Z, AD, CD clear, rcode %d)", resp[3], rcode, rcode)
	}
	for i := 4; i < 12; i++ {
		if resp[i] != 0 {
			t.Errorf("section counts % x, want all zero", resp[4:12])
			break
		}
	}
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

func bareOPT() *dns.OPT {
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	return o
}

// TestFormErr sends queries RFC 1035 and RFC 6891 call malformed.
func TestFormErr(t *testing.T) {
	s := startServer(t, srvOpts{})
	q := dns.Question{Name: "www.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET}
	cases := []struct {
		name     string
		build    func(m *dns.Msg)
		question []dns.Question // echoed question
		opt      bool           // whether the FORMERR carries an OPT
	}{
		{"QDCOUNT 0", func(m *dns.Msg) { m.Question = nil }, []dns.Question{}, false},
		{"QDCOUNT 0 with OPT", func(m *dns.Msg) { m.Question = nil; m.Extra = []dns.RR{bareOPT()} }, []dns.Question{}, true},
		{"QDCOUNT 2", func(m *dns.Msg) {
			m.Question = append(m.Question, dns.Question{Name: "example.com.", Qtype: dns.TypeSOA, Qclass: dns.ClassINET})
		}, []dns.Question{}, false},
		{"QDCOUNT 2 same question", func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }, []dns.Question{}, false},
		{"two OPT records", func(m *dns.Msg) { m.Extra = []dns.RR{bareOPT(), bareOPT()} }, []dns.Question{q}, false},
		{"OPT in the answer section", func(m *dns.Msg) { m.Answer = []dns.RR{bareOPT()} }, []dns.Question{q}, false},
		{"OPT in the authority section", func(m *dns.Msg) { m.Ns = []dns.RR{bareOPT()} }, []dns.Question{q}, false},
		{"OPT with a non-root owner", func(m *dns.Msg) {
			o := bareOPT()
			o.Hdr.Name = "example.com."
			m.Extra = []dns.RR{o}
		}, []dns.Question{q}, false},
		{"question type OPT", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeOPT }, []dns.Question{{Name: "www.example.com.", Qtype: dns.TypeOPT, Qclass: dns.ClassINET}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, tg := range targets(s) {
				for _, network := range networks {
					t.Run(tg.name+"/"+network, func(t *testing.T) {
						m := query(q.Name, q.Qtype)
						m.RecursionDesired = true
						c.build(m)
						r, _ := exchangeMsg(t, network, tg.addr, m)
						if r.Id != m.Id || !r.Response || r.Opcode != dns.OpcodeQuery {
							t.Errorf("id %d QR %v opcode %d; want id %d, QR, QUERY", r.Id, r.Response, r.Opcode, m.Id)
						}
						if r.Rcode != dns.RcodeFormatError {
							t.Errorf("rcode = %s, want FORMERR", rcodeName(r.Rcode))
						}
						if r.Authoritative || r.Truncated || r.RecursionAvailable || r.Zero || r.AuthenticatedData {
							t.Errorf("flags AA %v TC %v RA %v Z %v AD %v; want all clear", r.Authoritative, r.Truncated, r.RecursionAvailable, r.Zero, r.AuthenticatedData)
						}
						if !r.RecursionDesired {
							t.Errorf("RD not copied")
						}
						if len(r.Question) != len(c.question) || (len(c.question) == 1 && r.Question[0] != c.question[0]) {
							t.Errorf("question = %v, want %v", r.Question, c.question)
						}
						if len(r.Answer)+len(r.Ns) != 0 {
							t.Errorf("records in a FORMERR: %v %v", r.Answer, r.Ns)
						}
						o := r.IsEdns0()
						if nExtra := len(r.Extra); c.opt != (o != nil) || (c.opt && nExtra != 1) || (!c.opt && nExtra != 0) {
							t.Errorf("additional = %v, want an OPT: %v", r.Extra, c.opt)
						}
						if o != nil && (o.UDPSize() != 1232 || o.Version() != 0 || o.Hdr.Ttl != 0 || len(o.Option) != 0) {
							t.Errorf("OPT = %v", o)
						}
					})
				}
			}
		})
	}
}

// TestANY checks that ANY is answered with one RRset of the name (RFC 8482),
// the same RRset a query for its type gets, and negative answers as usual.
func TestANY(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, name := range []string{"example.com.", "www.example.com.", "mail.example.com.", "foo.wild.example.com.", "alias.example.com."} {
		t.Run(name, func(t *testing.T) {
			for _, tg := range targets(s) {
				for _, network := range networks {
					t.Run(tg.name+"/"+network, func(t *testing.T) {
						m := query(name, dns.TypeANY)
						r := dnstest.Exchange(t, network, tg.addr, m)
						if r.Rcode != dns.RcodeSuccess || !r.Authoritative || r.Truncated {
							t.Fatalf("rcode %s AA %v TC %v; want NOERROR, AA, no TC", rcodeName(r.Rcode), r.Authoritative, r.Truncated)
						}
						if len(r.Answer) == 0 {
							t.Fatalf("empty answer")
						}
						h := r.Answer[0].Header()
						for _, rr := range r.Answer {
							if rr.Header().Rrtype != h.Rrtype || rr.Header().Name != h.Name {
								t.Fatalf("more than one RRset: %v", r.Answer)
							}
						}
						// The whole RRset: what a query for that type returns.
						direct := dnstest.Exchange(t, network, tg.addr, query(name, h.Rrtype))
						if !sameSet(rrStrings(r.Answer), rrStrings(direct.Answer)) {
							t.Errorf("ANY answer %v, but the %s RRset is %v", r.Answer, dns.TypeToString[h.Rrtype], direct.Answer)
						}
					})
				}
			}
		})
	}
	for _, c := range []struct {
		name  string
		rcode int
	}{{"nx.example.com.", dns.RcodeNameError}, {"ent.example.com.", dns.RcodeSuccess}} {
		t.Run(c.name, func(t *testing.T) {
			m := query(c.name, dns.TypeANY)
			r := dnstest.Exchange(t, "udp", s.V4, m)
			checkResponse(t, m, r, want{rcode: c.rcode, aa: true, ns: rrs(t, negSOA)})
		})
	}
}

// TestZoneTransfer checks that AXFR and IXFR are refused over both transports.
func TestZoneTransfer(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, qtype := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
		for _, tg := range targets(s) {
			for _, network := range networks {
				t.Run(dns.TypeToString[qtype]+"/"+tg.name+"/"+network, func(t *testing.T) {
					m := new(dns.Msg)
					if qtype == dns.TypeAXFR {
						m.SetAxfr("example.com.")
					} else {
						m.SetIxfr("example.com.", 2024010101, "ns1.example.com.", "hostmaster.example.com.")
					}
					r, _ := exchangeMsg(t, network, tg.addr, m)
					checkResponse(t, m, r, want{rcode: dns.RcodeRefused})
				})
			}
		}
	}
}

// TestChaos checks the CHAOS-class identification names.
func TestChaos(t *testing.T) {
	def := startServer(t, srvOpts{})
	withVersion := startServer(t, srvOpts{version: "steer 1.2.3-test"})
	anon := startServer(t, srvOpts{noIdentity: true})
	txt := func(owner, text string) []string {
		return rrs(t, owner+` 0 CH TXT "`+text+`"`)
	}
	cases := []struct {
		name   string
		srv    *servertest.Server
		qname  string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{"id.server", def, "id.server.", dns.TypeTXT, dns.RcodeSuccess, rrs(t, identTXT)},
		{"hostname.bind", def, "hostname.bind.", dns.TypeTXT, dns.RcodeSuccess, rrs(t, hostnTXT)},
		{"id.server mixed case", def, "ID.Server.", dns.TypeTXT, dns.RcodeSuccess, txt("ID.Server.", testIdentity)},
		{"id.server ANY", def, "id.server.", dns.TypeANY, dns.RcodeSuccess, rrs(t, identTXT)},
		{"id.server type A", def, "id.server.", dns.TypeA, dns.RcodeRefused, nil},
		{"version.bind hidden", def, "version.bind.", dns.TypeTXT, dns.RcodeRefused, nil},
		{"version.server hidden", def, "version.server.", dns.TypeTXT, dns.RcodeRefused, nil},
		{"version.bind set", withVersion, "version.bind.", dns.TypeTXT, dns.RcodeSuccess, txt("version.bind.", "steer 1.2.3-test")},
		{"version.server set", withVersion, "version.server.", dns.TypeTXT, dns.RcodeSuccess, txt("version.server.", "steer 1.2.3-test")},
		{"unknown chaos name", def, "authors.bind.", dns.TypeTXT, dns.RcodeRefused, nil},
		{"chaos name in the zone", def, "example.com.", dns.TypeTXT, dns.RcodeRefused, nil},
		{"no identity", anon, "id.server.", dns.TypeTXT, dns.RcodeRefused, nil},
		{"no identity hostname.bind", anon, "hostname.bind.", dns.TypeTXT, dns.RcodeRefused, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, tg := range targets(c.srv) {
				for _, network := range networks {
					t.Run(tg.name+"/"+network, func(t *testing.T) {
						m := query(c.qname, c.qtype)
						m.Question[0].Qclass = dns.ClassCHAOS
						r := dnstest.Exchange(t, network, tg.addr, m)
						checkResponse(t, m, r, want{rcode: c.rcode, aa: c.rcode == dns.RcodeSuccess, answer: c.answer})
					})
					t.Run(tg.name+"/"+network+"/kdig", func(t *testing.T) {
						args := []string{"+norec", "-c", "CH", c.qname, dns.TypeToString[c.qtype]}
						if network == "tcp" {
							args = append(args, "+tcp")
						}
						r := dnstest.ParseKdig(t, dnstest.Kdig(t, tg.addr, args...))
						m := query(c.qname, c.qtype)
						m.Question[0].Qclass = dns.ClassCHAOS
						m.Question[0].Name = dns.CanonicalName(c.qname)
						m.Id = r.Id
						answer := c.answer
						if c.rcode == dns.RcodeSuccess {
							answer = txt(m.Question[0].Name, r.Answer[0].(*dns.TXT).Txt[0])
							if got := r.Answer[0].(*dns.TXT).Txt[0]; got != testIdentity && got != "steer 1.2.3-test" {
								t.Errorf("TXT %q", got)
							}
						}
						checkResponse(t, m, r, want{rcode: c.rcode, aa: c.rcode == dns.RcodeSuccess, answer: answer})
					})
				}
			}
		})
	}
}

// TestNSID checks that the NSID option (RFC 5001) returns the identity, and
// nothing when no identity is configured; and that the TCP keepalive option
// (RFC 7828) is answered over TCP only.
func TestNSID(t *testing.T) {
	def := startServer(t, srvOpts{})
	anon := startServer(t, srvOpts{noIdentity: true})
	for _, c := range []struct {
		name string
		srv  *servertest.Server
		nsid string
	}{{"identity", def, testIdentity}, {"no identity", anon, ""}} {
		for _, tg := range targets(c.srv) {
			for _, network := range networks {
				t.Run(c.name+"/"+tg.name+"/"+network, func(t *testing.T) {
					m := ednsQuery("www.example.com.", dns.TypeA, 1232)
					m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
					r := dnstest.Exchange(t, network, tg.addr, m)
					checkResponse(t, m, r, want{aa: true, answer: rrs(t, wwwA), opt: &wantOPT{nsid: c.nsid}})
				})
				t.Run(c.name+"/"+tg.name+"/"+network+"/kdig", func(t *testing.T) {
					args := []string{"+norec", "+nsid", "www.example.com.", "A"}
					if network == "tcp" {
						args = append(args, "+tcp")
					}
					r := dnstest.ParseKdig(t, dnstest.Kdig(t, tg.addr, args...))
					m := ednsQuery("www.example.com.", dns.TypeA, 1232)
					m.Id = r.Id
					checkResponse(t, m, r, want{aa: true, answer: rrs(t, wwwA), opt: &wantOPT{nsid: c.nsid}})
				})
			}
		}
	}
	// The hex the option carries is exactly the identity's bytes.
	m := ednsQuery("example.com.", dns.TypeSOA, 1232)
	m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}
	r := dnstest.Exchange(t, "udp", def.V4, m)
	if o := r.IsEdns0(); o == nil || len(o.Option) != 1 {
		t.Fatalf("OPT %v", o)
	} else if b, _ := hex.DecodeString(o.Option[0].(*dns.EDNS0_NSID).Nsid); string(b) != testIdentity {
		t.Errorf("NSID %q, want %q", b, testIdentity)
	}

	for _, network := range networks {
		t.Run("keepalive/"+network, func(t *testing.T) {
			m := ednsQuery("www.example.com.", dns.TypeA, 1232)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}}
			r := dnstest.Exchange(t, network, def.V4, m)
			w := want{aa: true, answer: rrs(t, wwwA), opt: &wantOPT{}}
			if network == "tcp" {
				w.opt = &wantOPT{hasKA: true, keepalive: 50} // idle_timeout 5s in 100 ms units
			}
			checkResponse(t, m, r, w)
		})
	}
}

// TestUDPDropped checks that over UDP a packet shorter than a header, or a
// response (QR=1), gets no answer at all, and the server keeps answering.
func TestUDPDropped(t *testing.T) {
	s := startServer(t, srvOpts{})
	resp := query("www.example.com.", dns.TypeA)
	resp.Response = true
	respPkt, _ := resp.Pack()
	for _, tg := range targets(s) {
		t.Run(tg.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				pkt  []byte
			}{
				{"empty", []byte{}},
				{"11 bytes", make([]byte, 11)},
				{"response", respPkt},
			} {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					expectNoUDPResponse(t, tg.addr, c.pkt, 300*time.Millisecond)
				})
			}
		})
		// Run after the group above: its parallel subtests end with it.
		t.Run(tg.name+"/still answering", func(t *testing.T) {
			r := dnstest.Exchange(t, "udp", tg.addr, query("www.example.com.", dns.TypeA))
			if r.Rcode != dns.RcodeSuccess {
				t.Errorf("rcode %s", rcodeName(r.Rcode))
			}
		})
	}
}
