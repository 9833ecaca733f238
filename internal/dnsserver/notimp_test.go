package dnsserver_test

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// TestNotImpWithOPT: a non-QUERY request that carries a valid OPT gets
// NOTIMP with an OPT (RFC 6891 §7), and the question echoed; without an
// OPT it stays the bare header genreport's opcode test expects.
func TestNotImpWithOPT(t *testing.T) {
	h := newTestHandler(t, srvOpts{})
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeSOA)
	m.Opcode = dns.OpcodeNotify
	m.SetEdns0(1232, true)
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := h.HandleFrom(pkt, dnsserver.UDP, netip.Addr{}, make([]byte, 0, 1232))
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeNotImplemented || r.Opcode != dns.OpcodeNotify || r.Id != m.Id {
		t.Fatalf("got rcode %d opcode %d id %d", r.Rcode, r.Opcode, r.Id)
	}
	if o := r.IsEdns0(); o == nil || o.Version() != 0 || !o.Do() {
		t.Fatalf("NOTIMP without the OPT: %v", r)
	}
	if len(r.Question) != 1 || r.Question[0].Name != "example.com." {
		t.Fatalf("question not echoed: %v", r.Question)
	}
	m.Extra = nil
	pkt, _ = m.Pack()
	out = h.HandleFrom(pkt, dnsserver.UDP, netip.Addr{}, make([]byte, 0, 1232))
	if len(out) != 12 {
		t.Fatalf("without EDNS: %d bytes, want a 12-byte header", len(out))
	}
}
