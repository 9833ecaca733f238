package dnsserver_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// hdr builds a 12-byte query header with ID 0xBEEF and the given flags and counts.
func hdr(flags uint16, qd, an, ns, ar uint16) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b[0:], 0xBEEF)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[4:], qd)
	binary.BigEndian.PutUint16(b[6:], an)
	binary.BigEndian.PutUint16(b[8:], ns)
	binary.BigEndian.PutUint16(b[10:], ar)
	return b
}

// wireName encodes a dotted name without compression.
func wireName(name string) []byte {
	var b []byte
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if l == "" {
			continue
		}
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var (
	wwwQ    = cat(wireName("www.example.com."), []byte{0, 1, 0, 1})
	rootOPT = []byte{0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0} // ".", OPT, 1232, no options
	label63 = strings.Repeat("a", 63)
)

// The outcomes a malformed packet may have.
const (
	drop     = iota // Handle returns nil
	formErr         // FORMERR, question not echoed
	formErrQ        // FORMERR echoing the question
	notImp          // NOTIMP header
	answered        // a normal answer (controls: the packet is valid)
)

type malformedCase struct {
	name string
	pkt  []byte
	want int
}

var malformedCases = []malformedCase{
	{"empty", nil, drop},
	{"one byte", []byte{0xBE}, drop},
	{"eleven bytes", hdr(0, 1, 0, 0, 0)[:11], drop},
	{"response header", hdr(0x8000, 0, 0, 0, 0), drop},
	{"response with question", cat(hdr(0x8400, 1, 0, 0, 0), wwwQ), drop},
	{"header only", hdr(0, 0, 0, 0, 0), formErr},
	{"QDCOUNT 1, no question", hdr(0, 1, 0, 0, 0), formErr},
	{"question label cut short", cat(hdr(0, 1, 0, 0, 0), []byte{7, 'e', 'x', 'a'}), formErr},
	{"question without type and class", cat(hdr(0, 1, 0, 0, 0), wireName("www.example.com.")), formErr},
	{"question without class", cat(hdr(0, 1, 0, 0, 0), wireName("www.example.com."), []byte{0, 1}), formErr},
	{"compression pointer to itself", cat(hdr(0, 1, 0, 0, 0), []byte{0xC0, 12, 0, 1, 0, 1}), formErr},
	{"compression pointer loop of two", cat(hdr(0, 1, 0, 0, 0), []byte{1, 'a', 0xC0, 12, 0, 1, 0, 1}), formErr},
	{"compression pointer into the ID", cat(hdr(0, 1, 0, 0, 0), []byte{0xC0, 0, 0, 1, 0, 1}), formErr},
	{"compression pointer past the end", cat(hdr(0, 1, 0, 0, 0), []byte{0xC0, 0xFF, 0, 1, 0, 1}), formErr},
	{"label of 64 bytes", cat(hdr(0, 1, 0, 0, 0), []byte{64}, []byte(strings.Repeat("a", 64)), wireName("example.com."), []byte{0, 1, 0, 1}), formErr},
	{"extended label type 0x80", cat(hdr(0, 1, 0, 0, 0), []byte{0x80, 0}, []byte{0, 1, 0, 1}), formErr},
	{"name of 257 bytes", cat(hdr(0, 1, 0, 0, 0), wireName(strings.Repeat(label63+".", 4)), []byte{0, 1, 0, 1}), formErr},
	{"name of 255 bytes (control)", cat(hdr(0, 1, 0, 0, 0), wireName(strings.Repeat(label63+".", 3)+strings.Repeat("b", 49)+".example.com."), []byte{0, 1, 0, 1}), answered},
	{"label of 63 bytes (control)", cat(hdr(0, 1, 0, 0, 0), wireName(label63+".example.com."), []byte{0, 1, 0, 1}), answered},
	{"QDCOUNT 2", cat(hdr(0, 2, 0, 0, 0), wwwQ, wwwQ), formErr},
	{"QDCOUNT 2, one question", cat(hdr(0, 2, 0, 0, 0), wwwQ), formErr},
	{"QDCOUNT 65535", cat(hdr(0, 0xFFFF, 0, 0, 0), wwwQ), formErr},
	{"garbage after the message", cat(hdr(0, 1, 0, 0, 0), wwwQ, []byte{0xDE, 0xAD}), formErrQ},
	{"one byte after the message", cat(hdr(0, 1, 0, 0, 0), wwwQ, []byte{0}), formErrQ},
	{"garbage after the OPT", cat(hdr(0, 1, 0, 0, 1), wwwQ, rootOPT, []byte{1, 2, 3}), formErrQ},
	{"ARCOUNT 1, no record", cat(hdr(0, 1, 0, 0, 1), wwwQ), formErrQ},
	{"ANCOUNT 65535", cat(hdr(0, 1, 0xFFFF, 0, 0), wwwQ), formErrQ},
	{"record cut short", cat(hdr(0, 1, 1, 0, 0), wwwQ, []byte{0, 0, 1, 0, 1, 0, 0}), formErrQ},
	{"OPT RDLENGTH past the end", cat(hdr(0, 1, 0, 0, 1), wwwQ, []byte{0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 8, 0, 3}), formErrQ},
	{"OPT option overruns the RDATA", cat(hdr(0, 1, 0, 0, 1), wwwQ, []byte{0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 9}), formErrQ},
	{"two OPT records", cat(hdr(0, 1, 0, 0, 2), wwwQ, rootOPT, rootOPT), formErrQ},
	{"OPT in the answer section", cat(hdr(0, 1, 1, 0, 0), wwwQ, rootOPT), formErrQ},
	{"OPT owned by a name", cat(hdr(0, 1, 0, 0, 1), wwwQ, []byte{1, 'a'}, rootOPT), formErrQ},
	{"bare OPT (control)", cat(hdr(0, 1, 0, 0, 1), wwwQ, rootOPT), answered},
	{"opcode 15 with garbage", cat(hdr(15<<11, 0xFFFF, 0xFFFF, 0, 0), []byte{0xFF, 0xFF}), notImp},
	{"opcode UPDATE", cat(hdr(5<<11, 1, 0, 0, 0), wwwQ), notImp},
}

// TestHandleMalformed feeds broken packets to the handler directly, for
// both transports: each is dropped or answered FORMERR (or NOTIMP) with its
// ID, and nothing panics.
func TestHandleMalformed(t *testing.T) {
	h := newTestHandler(t, srvOpts{})
	for _, c := range malformedCases {
		for _, tr := range []dnsserver.Transport{dnsserver.UDP, dnsserver.TCP} {
			t.Run(c.name+"/"+tr.String(), func(t *testing.T) {
				in := bytes.Clone(c.pkt)
				out := h.HandleFrom(in, tr, netip.Addr{}, make([]byte, 0, 512))
				if !bytes.Equal(in, c.pkt) {
					t.Errorf("Handle modified the query")
				}
				if c.want == drop {
					if out != nil {
						t.Fatalf("got a %d-byte response, want the packet dropped", len(out))
					}
					return
				}
				if out == nil {
					t.Fatalf("dropped; want a response")
				}
				r := new(dns.Msg)
				if err := r.Unpack(out); err != nil {
					t.Fatalf("response does not unpack: %v", err)
				}
				if r.Id != 0xBEEF || !r.Response {
					t.Errorf("id %#x QR %v, want 0xbeef and QR", r.Id, r.Response)
				}
				if wantOp := int(c.pkt[2]>>3) & 0xF; r.Opcode != wantOp {
					t.Errorf("opcode %d, want %d", r.Opcode, wantOp)
				}
				switch c.want {
				case formErr, formErrQ:
					if r.Rcode != dns.RcodeFormatError {
						t.Errorf("rcode %s, want FORMERR", rcodeName(r.Rcode))
					}
					wantQ := 0
					if c.want == formErrQ {
						wantQ = 1
					}
					if len(r.Question) != wantQ {
						t.Errorf("question %v, want %d", r.Question, wantQ)
					} else if wantQ == 1 && (r.Question[0].Name != "www.example.com." || r.Question[0].Qtype != dns.TypeA) {
						t.Errorf("question %v", r.Question[0])
					}
					if len(r.Answer)+len(r.Ns) != 0 {
						t.Errorf("records in a FORMERR")
					}
				case notImp:
					if len(out) != 12 || r.Rcode != dns.RcodeNotImplemented {
						t.Errorf("%d bytes, rcode %s; want a 12-byte NOTIMP", len(out), rcodeName(r.Rcode))
					}
				case answered:
					if r.Rcode == dns.RcodeFormatError {
						t.Errorf("FORMERR for a valid query")
					}
				}
			})
		}
	}
}

// TestHandleBuffer checks Handle with no output buffer, a small one (it
// must grow, not cut the answer) and a large one (used in place).
func TestHandleBuffer(t *testing.T) {
	h := newTestHandler(t, srvOpts{})
	m := query("huge.example.com.", dns.TypeTXT)
	pkt, _ := m.Pack()
	for _, buf := range [][]byte{nil, make([]byte, 0, 12), make([]byte, 0, 100), make([]byte, 0, 65535)} {
		out := h.HandleFrom(pkt, dnsserver.TCP, netip.Addr{}, buf)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil || len(r.Answer) != 6 {
			t.Fatalf("cap %d: %d records, %v", cap(buf), len(r.Answer), err)
		}
		if cap(buf) >= len(out) && &out[0] != &buf[:1][0] {
			t.Errorf("cap %d: the answer (%d bytes) was not written into the buffer", cap(buf), len(out))
		}
	}
	// headerOnly with a tiny buffer.
	nt := hdr(15<<11, 0, 0, 0, 0)
	for _, buf := range [][]byte{nil, make([]byte, 0, 3)} {
		if out := h.HandleFrom(nt, dnsserver.UDP, netip.Addr{}, buf); len(out) != 12 {
			t.Errorf("NOTIMP with cap %d: %d bytes", cap(buf), len(out))
		}
	}
}
