// Package steeringtest tests traffic steering end to end: a real steer
// serving the Larkbook scenario on loopback sockets, queried with kdig, the
// miekg/dns client, raw packets, the steer CLI and Unbound as a recursive
// resolver that forwards the client subnet. The geo data is the synthetic
// Larkbook databases in the repository's testdata/geo (see its README for
// which address is which city).
package steeringtest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/servertest"
)

// Pool addresses of the Larkbook record.
const (
	apSouth      = "203.0.113.10"
	euCentral    = "198.51.100.20"
	usEast       = "192.0.2.30"
	usEastCanary = "192.0.2.31"
)

// The /28s of 192.0.2.0/24 in the Larkbook geo data, one city each.
const (
	punePfx      = "192.0.2.0/28"
	mumbaiPfx    = "192.0.2.16/28"
	guwahatiPfx  = "192.0.2.32/28"
	berlinPfx    = "192.0.2.48/28"
	frankfurtPfx = "192.0.2.64/28"
	lisbonPfx    = "192.0.2.80/28"
	columbusPfx  = "192.0.2.96/28"
	chicagoPfx   = "192.0.2.112/28"
	ashburnPfx   = "192.0.2.128/28"
	singaporePfx = "192.0.2.144/28"
	// Single addresses used as resolver (packet source) addresses.
	singaporeResolver = "192.0.2.150"
	ashburnResolver   = "192.0.2.130"
	berlinHost        = "192.0.2.50"
)

const shop = "shop.example.com."

// larkbookRecord is the steered record of the demo configuration.
var larkbookRecord = dnstest.LarkbookRecord()

// cidrRecord steers a lab network by CIDR; everything else gets pool y.
const cidrRecord = `  - name: lab.example.com
    ttl: 60
    pools:
      x: { address: 10.99.0.1 }
      y: { address: 10.99.0.2 }
    rules:
      - match: { cidr: 10.20.0.0/16 }
        pool: x
      - default: { pool: y }
`

// zoneFile is example.com with SOA, NS, a static name and a CNAME to the
// steered name, and no record at shop (its answers come from the pools).
const zoneFile = `$ORIGIN example.com.
$TTL 3600
@       IN SOA  ns1.example.com. hostmaster.example.com. 2026113001 7200 3600 1209600 300
        IN NS   ns1
        IN NS   ns2
ns1     IN A    192.0.2.53
ns2     IN A    198.51.100.53
static  IN A    192.0.2.80
www     IN CNAME shop
`

// geoPaths returns the absolute paths of the Larkbook City and ASN databases.
func geoPaths(t testing.TB) (city, asn string) {
	t.Helper()
	var err error
	if city, err = filepath.Abs("../../testdata/geo/larkbook-city.mmdb"); err != nil {
		t.Fatal(err)
	}
	if asn, err = filepath.Abs("../../testdata/geo/larkbook-asn.mmdb"); err != nil {
		t.Fatal(err)
	}
	return city, asn
}

// cfgOpts varies the test configuration.
type cfgOpts struct {
	ecsDisabled bool
	// maxV4 is ecs.max_source_v4; 0 means 28. The demo's 24 would cut every
	// /28 city of the Larkbook data to 192.0.2.0/24 (Pune), so the tests
	// that tell cities apart keep 28 bits; the truncation tests set 24.
	maxV4 int
	maxV6 int    // ecs.max_source_v6; 0 means 56
	extra string // more records, appended after the Larkbook one
	// top is more top-level keys (such as node:), ecsExtra more keys of
	// the ecs section (", unknown_client: node").
	top, ecsExtra string
}

// configYAML is the test configuration: the Larkbook record in zone
// example.com against the Larkbook geo databases.
func configYAML(t testing.TB, o cfgOpts) string {
	t.Helper()
	city, asn := geoPaths(t)
	enabled := "true"
	if o.ecsDisabled {
		enabled = "false"
	}
	maxV4 := o.maxV4
	if maxV4 == 0 {
		maxV4 = 28
	}
	maxV6 := o.maxV6
	if maxV6 == 0 {
		maxV6 = 56
	}
	return fmt.Sprintf(`listen: ["127.0.0.1:0"]
identity: steer-steering-test
version_bind: hide
zones:
  - origin: example.com
    file: example.com.zone
geo:
  databases: [%q, %q]
ecs: { enabled: %s, max_source_v4: %d, max_source_v6: %d%s }
%srecords:
%s%s`, city, asn, enabled, maxV4, maxV6, o.ecsExtra, o.top, larkbookRecord, o.extra)
}

// files returns the configuration and zone as servertest.Start takes them.
func files(t testing.TB, o cfgOpts) map[string]string {
	return map[string]string{"steer.yaml": configYAML(t, o), "example.com.zone": zoneFile}
}

// start serves the test configuration on loopback until the test ends.
func start(t testing.TB, o cfgOpts) *servertest.Server {
	t.Helper()
	return servertest.Start(t, files(t, o))
}

// ecsOption is the EDNS0_SUBNET option for prefix, as a resolver sends it.
func ecsOption(p netip.Prefix) *dns.EDNS0_SUBNET {
	fam := uint16(1)
	if p.Addr().Is6() {
		fam = 2
	}
	return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
}

// query builds a query for name and qtype with an OPT record carrying opts.
func query(name string, qtype uint16, opts ...dns.EDNS0) *dns.Msg {
	m := dnstest.Query(name, qtype)
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	o.Option = append(o.Option, opts...)
	m.Extra = append(m.Extra, o)
	return m
}

// ecsQuery is query with an ECS option for prefix (when valid).
func ecsQuery(name string, qtype uint16, prefix string) *dns.Msg {
	if prefix == "" {
		return query(name, qtype)
	}
	return query(name, qtype, ecsOption(netip.MustParsePrefix(prefix)))
}

// pack packs m or fails the test.
func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handleFrom answers m through the server's handler as if it came over UDP
// from the address from, and unpacks the response.
func handleFrom(t testing.TB, h *dnsserver.Handler, m *dns.Msg, from string) (*dns.Msg, []byte) {
	t.Helper()
	out := h.HandleFrom(pack(t, m), dnsserver.UDP, netip.MustParseAddr(from), make([]byte, 0, 65535))
	if out == nil {
		t.Fatalf("the handler dropped the query")
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatalf("unpacking the response: %v", err)
	}
	return r, append([]byte(nil), out...)
}

// exchangeRaw sends m over UDP and returns both the parsed response and its
// packet.
func exchangeRaw(t testing.TB, addr netip.AddrPort, m *dns.Msg) (*dns.Msg, []byte) {
	t.Helper()
	out, err := dnstest.ExchangeRaw("udp", addr, pack(t, m))
	if err != nil {
		t.Fatalf("raw exchange with %s: %v", addr, err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatalf("unpacking the response: %v", err)
	}
	if r.Id != m.Id {
		t.Fatalf("response ID %d, query ID %d", r.Id, m.Id)
	}
	return r, out
}

// rawECS returns the data of every ECS option in the OPT record of the
// response packet pkt, exactly as it is on the wire.
func rawECS(t testing.TB, pkt []byte) [][]byte {
	t.Helper()
	if len(pkt) < 12 {
		t.Fatalf("short packet")
	}
	qd := int(binary.BigEndian.Uint16(pkt[4:]))
	total := int(binary.BigEndian.Uint16(pkt[6:])) + int(binary.BigEndian.Uint16(pkt[8:])) + int(binary.BigEndian.Uint16(pkt[10:]))
	off := 12
	for range qd {
		_, o, err := dns.UnpackDomainName(pkt, off)
		if err != nil {
			t.Fatal(err)
		}
		off = o + 4
	}
	var out [][]byte
	for range total {
		start := off
		rr, o, err := dns.UnpackRR(pkt, off)
		if err != nil {
			t.Fatal(err)
		}
		off = o
		if _, ok := rr.(*dns.OPT); ok && pkt[start] == 0 {
			rdata := pkt[start+11 : off]
			for len(rdata) >= 4 {
				code := binary.BigEndian.Uint16(rdata)
				n := int(binary.BigEndian.Uint16(rdata[2:]))
				if 4+n > len(rdata) {
					t.Fatalf("option %d overruns the OPT RDATA", code)
				}
				if code == dns.EDNS0SUBNET {
					out = append(out, rdata[4:4+n])
				}
				rdata = rdata[4+n:]
			}
		}
	}
	return out
}

// wantECSWire checks the ECS option of a response packet byte for byte: the
// query's FAMILY, SOURCE PREFIX-LENGTH and ADDRESS octets, and scope.
func wantECSWire(t testing.TB, pkt []byte, sent netip.Prefix, scope int) {
	t.Helper()
	opts := rawECS(t, pkt)
	if len(opts) != 1 {
		t.Fatalf("response has %d ECS options, want 1", len(opts))
	}
	fam := uint16(1)
	if sent.Addr().Is6() {
		fam = 2
	}
	want := binary.BigEndian.AppendUint16(nil, fam)
	want = append(want, byte(sent.Bits()), byte(scope))
	want = append(want, sent.Addr().AsSlice()[:(sent.Bits()+7)/8]...)
	if got := opts[0]; string(got) != string(want) {
		t.Errorf("ECS option on the wire = % x, want % x (family %d, source /%d, scope /%d, address %s)", got, want, fam, sent.Bits(), scope, sent.Addr())
	}
}

// respECS returns the ECS option of a parsed response, or nil.
func respECS(r *dns.Msg) *dns.EDNS0_SUBNET {
	opt := r.IsEdns0()
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if s, ok := o.(*dns.EDNS0_SUBNET); ok {
			return s
		}
	}
	return nil
}

// wantECS checks the parsed ECS option of r against what was sent.
func wantECS(t testing.TB, r *dns.Msg, sent netip.Prefix, scope int) {
	t.Helper()
	s := respECS(r)
	if s == nil {
		t.Fatalf("no ECS option in the response:\n%v", r)
	}
	fam := uint16(1)
	if sent.Addr().Is6() {
		fam = 2
	}
	if s.Family != fam || int(s.SourceNetmask) != sent.Bits() || int(s.SourceScope) != scope || !s.Address.Equal(net.IP(sent.Addr().AsSlice())) {
		t.Errorf("ECS = family %d %s/%d scope /%d, want family %d %s scope /%d", s.Family, s.Address, s.SourceNetmask, s.SourceScope, fam, sent, scope)
	}
}

// wantNoECS fails when r carries an ECS option.
func wantNoECS(t testing.TB, r *dns.Msg) {
	t.Helper()
	if s := respECS(r); s != nil {
		t.Errorf("response has an ECS option (%v), want none", s)
	}
}

// addrs returns the A and AAAA addresses in r's answer section owned by name.
func addrs(r *dns.Msg, name string) []string {
	var out []string
	for _, rr := range r.Answer {
		if !strings.EqualFold(rr.Header().Name, name) {
			continue
		}
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	return out
}

// wantAnswer checks an authoritative NOERROR response holding exactly one
// A record for shop.example.com, one of want, with TTL 60.
func wantAnswer(t testing.TB, r *dns.Msg, want ...string) string {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative || !r.Response {
		t.Fatalf("rcode %s, aa %v, qr %v; want NOERROR, aa, qr\n%v", dns.RcodeToString[r.Rcode], r.Authoritative, r.Response, r)
	}
	if len(r.Answer) != 1 {
		t.Fatalf("%d answer records, want 1:\n%v", len(r.Answer), r)
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok || a.Hdr.Name != shop {
		t.Fatalf("answer %v, want an A record for %s", r.Answer[0], shop)
	}
	if a.Hdr.Ttl != 60 {
		t.Errorf("TTL %d, want 60", a.Hdr.Ttl)
	}
	got := a.A.String()
	for _, w := range want {
		if got == w {
			return got
		}
	}
	t.Errorf("answer %s, want one of %v", got, want)
	return got
}

// decide asks the compiled record name of the server's current snapshot
// what it decides for a client subnet (or address, bits = full length) and
// resolver, as the server's query path does.
func decide(t testing.TB, srv *servertest.Server, name string, client netip.Prefix, resolver netip.Addr, qtype uint16) policy.Decision {
	t.Helper()
	snap := srv.Handler().Snapshot()
	r := snap.Policies.Get(name)
	if r == nil {
		t.Fatalf("no steered record %s", name)
	}
	q := policy.Query{Client: client.Addr(), ClientBits: client.Bits(), Resolver: resolver, Qtype: qtype, Up: snap.Live.Up(r, qtype)}
	return r.Decide(&q)
}

// kdigResult is what tests read from kdig's output.
type kdigResult struct {
	status    string
	flags     []string
	answers   []kdigRR
	authority []kdigRR
	ecs       string // the CLIENT-SUBNET line's value, "" when absent
	hasEDNS   bool
	ancount   int
	authSOA   bool
	raw       string
}

type kdigRR struct {
	name  string
	ttl   int
	typ   string
	rdata string
}

// parseKdig reads kdig's default text output (through dnstest.ParseKdig,
// which fails on any line it does not understand) into the fields the
// tests compare.
func parseKdig(t testing.TB, out string) kdigResult {
	t.Helper()
	m := dnstest.ParseKdig(t, out)
	res := kdigResult{raw: out, ancount: len(m.Answer)}
	res.status = dns.RcodeToString[m.Rcode]
	if m.Rcode == dns.RcodeBadVers { // miekg/dns names 16 BADSIG
		res.status = "BADVERS"
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{m.Response, "qr"}, {m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.RecursionDesired, "rd"},
		{m.RecursionAvailable, "ra"}, {m.Zero, "z"}, {m.AuthenticatedData, "ad"}, {m.CheckingDisabled, "cd"}} {
		if f.on {
			res.flags = append(res.flags, f.name)
		}
	}
	if opt := m.IsEdns0(); opt != nil {
		res.hasEDNS = true
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				// As kdig prints it: netip keeps an IPv4-mapped address
				// in IPv6 form, net.IP would print it as IPv4.
				addr, _ := netip.AddrFromSlice(e.Address)
				res.ecs = fmt.Sprintf("%s/%d/%d", addr, e.SourceNetmask, e.SourceScope)
			}
		}
	}
	rrs := func(section []dns.RR) []kdigRR {
		var out []kdigRR
		for _, rr := range section {
			h := rr.Header()
			out = append(out, kdigRR{name: h.Name, ttl: int(h.Ttl), typ: dns.TypeToString[h.Rrtype],
				rdata: strings.TrimPrefix(rr.String(), h.String())})
		}
		return out
	}
	res.answers, res.authority = rrs(m.Answer), rrs(m.Ns)
	for _, rr := range m.Ns {
		if rr.Header().Rrtype == dns.TypeSOA {
			res.authSOA = true
		}
	}
	return res
}

func (k kdigResult) hasFlag(f string) bool {
	for _, x := range k.flags {
		if x == f {
			return true
		}
	}
	return false
}

// kdigA queries shop.example.com A through kdig with +subnet=prefix.
func kdigA(t testing.TB, addr netip.AddrPort, name, subnet string, extra ...string) kdigResult {
	t.Helper()
	args := append([]string{"+norec", name, "A"}, extra...)
	if subnet != "" {
		args = append(args, "+subnet="+subnet)
	}
	return parseKdig(t, dnstest.Kdig(t, addr, args...))
}
