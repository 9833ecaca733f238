package dnsserver_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
)

// fatMX is an MX RRset whose targets have address RRsets of several
// records each, too large for 900 bytes.
func fatMX() string {
	var b strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "fat MX %d mx%d.fat\n", i, i)
		for j := 1; j <= 3; j++ {
			fmt.Fprintf(&b, "mx%d.fat A 192.0.2.%d\n", i, 10*i+j)
		}
		for j := 1; j <= 2; j++ {
			fmt.Fprintf(&b, "mx%d.fat AAAA 2001:db8::%d:%d\n", i, i, j)
		}
	}
	return b.String()
}

// TestAdditionalFillsWholeRRsets: over UDP a response too large only
// because of its additional section keeps answer and authority, and as
// many of the additional RRsets, whole and in order, as fit, without TC
// (RFC 2181 §9; Knot does the same); the OPT is always there. The next
// RRset would not have fitted.
func TestAdditionalFillsWholeRRsets(t *testing.T) {
	h := handlerWithZone(t, fatMX())
	from := netip.MustParseAddr("192.0.2.150")
	m := query("fat.example.com.", dns.TypeMX)
	req, _ := m.Pack()
	full := new(dns.Msg)
	if err := full.Unpack(h.HandleFrom(req, dnsserver.TCP, from, make([]byte, 0, 65535))); err != nil {
		t.Fatal(err)
	}
	if len(full.Answer) != 8 || len(full.Extra) != 40 {
		t.Fatalf("over TCP: %d answers, %d additional; want 8 and 40", len(full.Answer), len(full.Extra))
	}
	partial := 0
	sizes := []int{noEDNS}
	for size := 512; size <= 900; size += 13 {
		sizes = append(sizes, size)
	}
	for _, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			m := query("fat.example.com.", dns.TypeMX)
			limit := dnsserver.MinUDPSize
			if size != noEDNS {
				m.SetEdns0(uint16(size), false)
				limit = size
			}
			req, _ := m.Pack()
			wire := h.HandleFrom(req, dnsserver.UDP, from, make([]byte, 0, 65535))
			if general := h.HandleGeneral(req, dnsserver.UDP, from, make([]byte, 0, 65535)); !bytes.Equal(wire, general) {
				t.Errorf("fast and general paths differ")
			}
			if len(wire) > limit {
				t.Fatalf("%d bytes, over the %d limit", len(wire), limit)
			}
			r := new(dns.Msg)
			if err := r.Unpack(wire); err != nil {
				t.Fatal(err)
			}
			if r.Truncated || len(r.Answer) != len(full.Answer) {
				t.Errorf("TC %v, %d answers; want no TC and all %d", r.Truncated, len(r.Answer), len(full.Answer))
			}
			extra := rrStrings(r.Extra)
			want := rrStrings(full.Extra)
			if len(extra) == 0 || len(extra) == len(want) {
				t.Fatalf("%d additional records; want some but not all %d", len(extra), len(want))
			}
			for i := range extra {
				if extra[i] != want[i] {
					t.Fatalf("additional %d is %s, want %s (the RRsets in order)", i, extra[i], want[i])
				}
			}
			// Whole RRsets: the last one kept is complete, and the next
			// one would have gone over the limit.
			n := len(extra)
			if n < len(want) && r.Extra[n-1].Header().Name == full.Extra[n].Header().Name &&
				r.Extra[n-1].Header().Rrtype == full.Extra[n].Header().Rrtype {
				t.Errorf("RRset %s %s cut after %d records", full.Extra[n].Header().Name, dns.TypeToString[full.Extra[n].Header().Rrtype], n)
			}
			end := n + 1
			for end < len(full.Extra) && full.Extra[end].Header().Name == full.Extra[n].Header().Name &&
				full.Extra[end].Header().Rrtype == full.Extra[n].Header().Rrtype {
				end++
			}
			more := r.Copy()
			more.Compress = true                                                         // as the server packs
			more.Extra = append(append([]dns.RR{}, full.Extra[:end]...), r.Extra[n:]...) // the OPT last, if any
			if b, err := more.Pack(); err != nil || len(b) <= limit {
				t.Errorf("the next RRset would fit too (%d bytes of %d)", len(b), limit)
			}
			one := r.Copy()
			one.Compress = true
			one.Extra = append(append([]dns.RR{}, full.Extra[:n+1]...), r.Extra[n:]...)
			if b, err := one.Pack(); err == nil && len(b) <= limit {
				partial++ // a record-by-record fill would have cut the RRset
			}
			if (size != noEDNS) != (r.IsEdns0() != nil) {
				t.Errorf("OPT %v with EDNS %v", r.IsEdns0() != nil, size != noEDNS)
			}
		})
	}
	if partial == 0 {
		t.Errorf("no size left room for part of the next RRset: the test does not check RRsets are kept whole")
	}
}
