package ecs

import (
	"bytes"
	"errors"

	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// opt builds ECS option data: FAMILY, SOURCE, SCOPE, ADDRESS.
func opt(family uint16, source, scope byte, addr ...byte) []byte {
	return append([]byte{byte(family >> 8), byte(family), source, scope}, addr...)
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name       string
		data       []byte
		maxV4      int
		maxV6      int
		family     uint16
		sourceBits int
		addr       string
		prefix     string // "" for invalid
		truncated  bool
	}{
		{"v4 /24", opt(1, 24, 0, 192, 0, 2), 24, 56, 1, 24, "192.0.2.0", "192.0.2.0/24", false},
		{"v4 /32 truncated to /24", opt(1, 32, 0, 192, 0, 2, 77), 24, 56, 1, 32, "192.0.2.77", "192.0.2.0/24", true},
		{"v4 /28 truncated to /24", opt(1, 28, 0, 192, 0, 2, 0x50), 24, 56, 1, 28, "192.0.2.80", "192.0.2.0/24", true},
		{"v4 /20 under the maximum", opt(1, 20, 0, 198, 51, 0x60), 24, 56, 1, 20, "198.51.96.0", "198.51.96.0/20", false},
		{"v4 /25 with max 32", opt(1, 25, 0, 203, 0, 113, 0x80), 32, 56, 1, 25, "203.0.113.128", "203.0.113.128/25", false},
		{"v4 /22 truncated to /16", opt(1, 22, 0, 10, 20, 0xfc), 16, 56, 1, 22, "10.20.252.0", "10.20.0.0/16", true},
		{"v4 /0", opt(1, 0, 0), 24, 56, 1, 0, "0.0.0.0", "", false},
		{"v4 /1", opt(1, 1, 0, 0x80), 24, 56, 1, 1, "128.0.0.0", "128.0.0.0/1", false},
		{"v6 /56", opt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab), 24, 56, 2, 56, "2001:db8:2:ab00::", "2001:db8:2:ab00::/56", false},
		{"v6 /64 truncated to /56", opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab, 0xcd), 24, 56, 2, 64, "2001:db8:2:abcd::", "2001:db8:2:ab00::/56", true},
		{"v6 /128 truncated to /48", opt(2, 128, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), 24, 48, 2, 128, "2001:db8:2::1", "2001:db8:2::/48", true},
		{"v6 /33", opt(2, 33, 0, 0x20, 0x01, 0x0d, 0xb8, 0x80), 24, 56, 2, 33, "2001:db8:8000::", "2001:db8:8000::/33", false},
		{"v6 /0", opt(2, 0, 0), 24, 56, 2, 0, "::", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.data, tt.maxV4, tt.maxV6)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.Family != tt.family || s.SourceBits != tt.sourceBits {
				t.Errorf("family %d source %d, want %d %d", s.Family, s.SourceBits, tt.family, tt.sourceBits)
			}
			if tt.addr == "" {
				if s.Addr.IsValid() {
					t.Errorf("Addr = %v, want invalid", s.Addr)
				}
			} else if s.Addr != netip.MustParseAddr(tt.addr) {
				t.Errorf("Addr = %v, want %v", s.Addr, tt.addr)
			}
			if tt.prefix == "" {
				if s.Prefix.IsValid() {
					t.Errorf("Prefix = %v, want invalid", s.Prefix)
				}
			} else if s.Prefix != netip.MustParsePrefix(tt.prefix) {
				t.Errorf("Prefix = %v, want %v", s.Prefix, tt.prefix)
			}
			if s.Truncated() != tt.truncated {
				t.Errorf("Truncated() = %v, want %v", s.Truncated(), tt.truncated)
			}
			if s.Family == FamilyIPv4 && s.Addr.IsValid() && !s.Addr.Is4() || s.Family == FamilyIPv6 && !s.Addr.Is6() {
				t.Errorf("Addr %v has the wrong family for %d", s.Addr, s.Family)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrLength},
		{"three bytes", []byte{0, 1, 24}, ErrLength},
		{"unknown family 3", opt(3, 24, 0, 192, 0, 2), ErrFamily},
		{"unknown family 0xffff", opt(0xffff, 0, 0), ErrFamily},
		{"family 0 with a source", opt(0, 8, 0, 10), ErrFamily},
		{"family 0 /0", opt(0, 0, 0), ErrFamily},
		{"unknown family 3 /0", opt(3, 0, 0), ErrFamily},
		{"v4 source 33", opt(1, 33, 0, 192, 0, 2, 1, 0), ErrSource},
		{"v4 source 255", append(opt(1, 255, 0), make([]byte, 32)...), ErrSource},
		{"v6 source 129", append(opt(2, 129, 0), make([]byte, 17)...), ErrSource},
		{"v4 /24 two octets", opt(1, 24, 0, 192, 0), ErrLength},
		{"v4 /24 four octets", opt(1, 24, 0, 192, 0, 2, 0), ErrLength},
		{"v4 /0 one octet", opt(1, 0, 0, 0), ErrLength},
		{"v4 /32 three octets", opt(1, 32, 0, 192, 0, 2), ErrLength},
		{"v6 /56 six octets", opt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2), ErrLength},
		{"v6 /56 eight octets", opt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0), ErrLength},
		{"v4 scope 24", opt(1, 24, 24, 192, 0, 2), ErrScope},
		{"v6 scope 1", opt(2, 48, 1, 0x20, 0x01, 0x0d, 0xb8, 0, 2), ErrScope},
		{"v4 /23 with bit 24 set", opt(1, 23, 0, 192, 0, 3), ErrAddress},
		{"v4 /28 with host bits", opt(1, 28, 0, 192, 0, 2, 0x55), ErrAddress},
		{"v4 /1 with bit 2 set", opt(1, 1, 0, 0xc0), ErrAddress},
		{"v6 /33 with bit 34 set", opt(2, 33, 0, 0x20, 0x01, 0x0d, 0xb8, 0x40), ErrAddress},
		{"v6 /127 with the last bit set", opt(2, 127, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), ErrAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.data, 24, 56)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%x) = %+v, %v; want %v", tt.data, s, err, tt.want)
			}
		})
	}
}

func TestScope(t *testing.T) {
	parse := func(data []byte, maxV4, maxV6 int) Subnet {
		t.Helper()
		s, err := Parse(data, maxV4, maxV6)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	v4_24 := parse(opt(1, 24, 0, 192, 0, 2), 24, 56)
	v4_32 := parse(opt(1, 32, 0, 192, 0, 2, 5), 24, 56) // truncated to /24
	v4_20 := parse(opt(1, 20, 0, 192, 0, 0), 24, 56)
	v4_0 := parse(opt(1, 0, 0), 24, 56)
	v6_56 := parse(opt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0), 24, 56)
	v6_64 := parse(opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 1), 24, 56) // truncated to /56
	tests := []struct {
		name     string
		s        Subnet
		decision int
		want     int
	}{
		{"not steered", v4_24, -1, 0},
		{"decision /0", v4_24, 0, 0},
		{"decision 16", v4_24, 16, 16},
		{"decision 24", v4_24, 24, 24},
		{"decision 28 beyond the source", v4_24, 28, 28},
		{"decision 32", v4_24, 32, 32},
		{"decision beyond 32 is capped", v4_24, 40, 32},
		{"truncated: decision 16", v4_32, 16, 16},
		{"truncated: decision 28 capped at 24", v4_32, 28, 24},
		{"truncated: decision 32 capped at 24", v4_32, 32, 24},
		{"truncated: not steered", v4_32, -1, 0},
		{"/20 source, decision 28", v4_20, 28, 28},
		{"/0 source", v4_0, 16, 0},
		{"/0 source not steered", v4_0, -1, 0},
		{"v6 decision 48", v6_56, 48, 48},
		{"v6 decision 64 beyond the source", v6_56, 64, 64},
		{"v6 decision 200 capped", v6_56, 200, 128},
		{"v6 truncated: decision 64 capped at 56", v6_64, 64, 56},
		{"v6 truncated: decision 47", v6_64, 47, 47},
		{"v6 not steered", v6_64, -1, 0},
	}
	for _, tt := range tests {
		if got := tt.s.Scope(tt.decision); got != tt.want {
			t.Errorf("%s: Scope(%d) = %d, want %d", tt.name, tt.decision, got, tt.want)
		}
	}
}

// TestOptionRoundTrip packs the response option with miekg/dns, unpacks
// it, and checks it echoes the query's family, source and address with the
// scope; the packed option data equals the query's except for SCOPE.
func TestOptionRoundTrip(t *testing.T) {
	tests := [][]byte{
		opt(1, 24, 0, 192, 0, 2),
		opt(1, 32, 0, 192, 0, 2, 77),
		opt(1, 20, 0, 198, 51, 0x60),
		opt(1, 0, 0),
		opt(2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab),
		opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab, 0xcd),
		opt(2, 128, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
		opt(2, 0, 0),
	}
	for _, data := range tests {
		s, err := Parse(data, 24, 56)
		if err != nil {
			t.Fatalf("Parse(%x): %v", data, err)
		}
		for _, decision := range []int{-1, 0, 16, 24, 48, 64} {
			scope := s.Scope(decision) // never beyond the family's length
			o := s.Option(scope)
			if o.Code != dns.EDNS0SUBNET {
				t.Fatalf("Code = %d", o.Code)
			}
			m := new(dns.Msg)
			m.SetQuestion("shop.example.com.", dns.TypeA)
			m.Response = true
			e := new(dns.OPT)
			e.Hdr.Name = "."
			e.Hdr.Rrtype = dns.TypeOPT
			e.SetUDPSize(1232)
			e.Option = append(e.Option, o)
			m.Extra = append(m.Extra, e)
			wire, err := m.Pack()
			if err != nil {
				t.Fatalf("%x scope %d: Pack: %v", data, scope, err)
			}
			var back dns.Msg
			if err := back.Unpack(wire); err != nil {
				t.Fatalf("%x scope %d: Unpack: %v", data, scope, err)
			}
			bo := back.IsEdns0()
			if bo == nil || len(bo.Option) != 1 {
				t.Fatalf("%x scope %d: no ECS option after the round trip", data, scope)
			}
			got, ok := bo.Option[0].(*dns.EDNS0_SUBNET)
			if !ok {
				t.Fatalf("%x: option is %T", data, bo.Option[0])
			}
			if got.Family != s.Family || int(got.SourceNetmask) != s.SourceBits || int(got.SourceScope) != scope {
				t.Errorf("%x scope %d: got family %d source %d scope %d", data, scope, got.Family, got.SourceNetmask, got.SourceScope)
			}
			if s.Addr.IsValid() {
				ga, ok := netip.AddrFromSlice(got.Address)
				if !ok || ga.Unmap() != s.Addr.Unmap() {
					t.Errorf("%x scope %d: address %v, want %v", data, scope, got.Address, s.Addr)
				}
			}
			// The option's wire data: the query's with SCOPE filled in.
			// It is the last option of the last RR: CODE, LENGTH, data.
			n := len(data)
			if len(wire) < n+4 || !bytes.Equal(wire[len(wire)-n-4:len(wire)-n], []byte{0, 8, byte(n >> 8), byte(n)}) {
				t.Fatalf("%x scope %d: option header not found at the end of %x", data, scope, wire)
			}
			packed := wire[len(wire)-n:]
			want := bytes.Clone(data)
			want[3] = byte(scope)
			if !bytes.Equal(packed, want) {
				t.Errorf("option data %x, want %x", packed, want)
			}
			// And it parses back as the same subnet (bar the scope).
			if scope == 0 {
				again, err := Parse(packed, 24, 56)
				if err != nil || again != s {
					t.Errorf("reparse of %x = %+v, %v; want %+v", packed, again, err, s)
				}
			}
		}
	}
}

func TestClient(t *testing.T) {
	from := netip.MustParseAddr("::ffff:192.0.2.150")
	s, err := Parse(opt(1, 32, 0, 192, 0, 2, 37), 24, 56)
	if err != nil {
		t.Fatal(err)
	}
	if a, bits, by := Client(&s, true, from); a != netip.MustParseAddr("192.0.2.0") || bits != 24 || !by {
		t.Errorf("Client(subnet) = %v/%d, want 192.0.2.0/24", a, bits)
	}
	if a, bits, by := Client(&s, false, from); a != netip.MustParseAddr("192.0.2.150") || bits != 32 || by {
		t.Errorf("Client(no ECS) = %v/%d, want the resolver 192.0.2.150/32", a, bits)
	}
	zero, err := Parse(opt(1, 0, 0), 24, 56)
	if err != nil {
		t.Fatal(err)
	}
	if a, bits, by := Client(&zero, true, from); a != netip.MustParseAddr("192.0.2.150") || bits != 32 || by {
		t.Errorf("Client(/0 subnet) = %v/%d, want the resolver", a, bits)
	}
	v6 := netip.MustParseAddr("2001:db8:a::53")
	if a, bits, _ := Client(&zero, true, v6); a != v6 || bits != 128 {
		t.Errorf("Client(/0 subnet, v6 resolver) = %v/%d", a, bits)
	}
	s6, err := Parse(opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab, 0xcd), 24, 56)
	if err != nil {
		t.Fatal(err)
	}
	if a, bits, _ := Client(&s6, true, from); a != netip.MustParseAddr("2001:db8:2:ab00::") || bits != 56 {
		t.Errorf("Client(v6 subnet) = %v/%d", a, bits)
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	inputs := [][]byte{
		opt(1, 24, 0, 192, 0, 2),
		opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab, 0xcd),
		opt(1, 24, 1, 192, 0, 2),    // error path
		opt(3, 24, 0, 192, 0, 2),    // error path
		opt(1, 28, 0, 192, 0, 2, 1), // error path
	}
	var sink Subnet
	for _, in := range inputs {
		allocs := testing.AllocsPerRun(200, func() {
			s, _ := Parse(in, 24, 56)
			sink = s
			_ = sink.Scope(24)
			_ = sink.Truncated()
		})
		if allocs != 0 {
			t.Errorf("Parse(%x) allocates %v times", in, allocs)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := opt(2, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 2, 0xab, 0xcd)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, 24, 56); err != nil {
			b.Fatal(err)
		}
	}
}
