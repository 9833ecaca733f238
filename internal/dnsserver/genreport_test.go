package dnsserver_test

// A re-implementation of ISC's EDNS compliance tester, genreport
// (DNS-Compliance-Testing), for the tests that apply to an authoritative
// server without DNSSEC: each test sends exactly the bytes genreport sends
// and judges the response with genreport's process() rules, tag for tag.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
)

// genZone is the zone genreport is pointed at; every query asks its apex.
const genZone = "example.com"

// EDNS option TLVs exactly as genreport writes them.
var (
	genOpt100  = []byte{0x00, 0x64, 0x00, 0x00}
	genNSID    = []byte{0x00, 0x03, 0x00, 0x00}
	genECS     = []byte{0x00, 0x08, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00}
	genExpire  = []byte{0x00, 0x09, 0x00, 0x00}
	genCookie  = []byte{0x00, 0x0a, 0x00, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	genOptlist = bytes.Join([][]byte{genNSID, genECS, genExpire, genCookie}, nil)
	genClient  = []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
)

const ednsDO = 0x8000

// genTest is one row of genreport's test table.
type genTest struct {
	name    string
	qtype   uint16
	udpsize uint16 // 0: no OPT record
	version uint8
	flags   uint16 // EDNS flags (the low 16 bits of the OPT TTL)
	opts    []byte // OPT RDATA
	tcp     bool
	ignore  bool // accept TC=1 without retrying over TCP (edns@512)
	// Header bits. aa is in genreport's table but never applied to the
	// packet (the "aa quirk"), so it is here only for the record.
	aa, tc, rd, ra, z, ad, cd bool
	opcode                    int
	// cookieTest: the tests that also accept BADCOOKIE with a valid cookie.
	cookieTest bool
	// info lists the informational tags steer's "ok" must carry (genreport's
	// pass rule is only "ok" or "ok,…").
	info []string
}

// sentECS: the test sends a client subnet option, which a server may answer
// (tag "subnet") or ignore.
func (g genTest) sentECS() bool { return bytes.Contains(g.opts, genECS) }

func (g genTest) sentCookie() bool { return bytes.Contains(g.opts, genCookie) }

// genTests are the EDNS, FULL and COMM groups of genreport (dnswkk and icmp,
// which only -i runs, are not here: steer has no TSIG keys).
var genTests = []genTest{
	{name: "dns", qtype: dns.TypeSOA},
	{name: "aa", qtype: dns.TypeSOA, aa: true},
	{name: "ad", qtype: dns.TypeSOA, ad: true},
	{name: "cd", qtype: dns.TypeSOA, cd: true},
	{name: "ra", qtype: dns.TypeSOA, ra: true},
	{name: "rd", qtype: dns.TypeSOA, rd: true},
	{name: "tc", qtype: dns.TypeSOA, tc: true},
	{name: "zflag", qtype: dns.TypeSOA, z: true},
	{name: "opcode", opcode: 15},
	{name: "opcodeflg", opcode: 15, tc: true, rd: true, ra: true, cd: true, ad: true, z: true, aa: true},
	{name: "type666", qtype: 666},
	{name: "tcp", qtype: dns.TypeSOA, tcp: true},
	{name: "edns", qtype: dns.TypeSOA, udpsize: 4096},
	{name: "edns1", qtype: dns.TypeSOA, udpsize: 4096, version: 1},
	{name: "edns@512", qtype: dns.TypeDNSKEY, udpsize: 512, ignore: true},
	{name: "ednsopt", qtype: dns.TypeSOA, udpsize: 4096, opts: genOpt100},
	{name: "edns1opt", qtype: dns.TypeSOA, udpsize: 4096, version: 1, opts: genOpt100},
	{name: "do", qtype: dns.TypeSOA, udpsize: 4096, flags: ednsDO},
	{name: "docd", qtype: dns.TypeSOA, udpsize: 4096, flags: ednsDO, cd: true},
	{name: "edns1do", qtype: dns.TypeSOA, udpsize: 4096, version: 1, flags: ednsDO},
	{name: "ednsflags", qtype: dns.TypeSOA, udpsize: 4096, flags: 0x0080},
	{name: "optlist", qtype: dns.TypeSOA, udpsize: 4096, opts: genOptlist, cookieTest: true, info: []string{"nsid"}},
	{name: "ednsnsid", qtype: dns.TypeSOA, udpsize: 4096, opts: genNSID, info: []string{"nsid"}},
	{name: "ednscookie", qtype: dns.TypeSOA, udpsize: 4096, opts: genCookie, cookieTest: true},
	{name: "ednsexpire", qtype: dns.TypeSOA, udpsize: 4096, opts: genExpire},
	{name: "ednssubnet", qtype: dns.TypeSOA, udpsize: 4096, opts: genECS},
	{name: "edns1nsid", qtype: dns.TypeSOA, udpsize: 4096, version: 1, opts: genNSID},
	{name: "edns1cookie", qtype: dns.TypeSOA, udpsize: 4096, version: 1, opts: genCookie},
	{name: "edns1expire", qtype: dns.TypeSOA, udpsize: 4096, version: 1, opts: genExpire},
	{name: "edns1subnet", qtype: dns.TypeSOA, udpsize: 4096, version: 1, opts: genECS},
	{name: "ednstcp", qtype: dns.TypeDNSKEY, udpsize: 512, flags: ednsDO, tcp: true},
	{name: "bind11", qtype: dns.TypeSOA, udpsize: 4096, flags: ednsDO, opts: genCookie, cookieTest: true},
	{name: "dig11", qtype: dns.TypeSOA, udpsize: 4096, rd: true, ad: true, opts: genCookie, cookieTest: true},
}

// genTypeTests are genreport's -t tests: the apex asked for each type.
var genTypeTests = []struct {
	name  string
	qtype uint16
}{
	{"A", 1}, {"NS", 2}, {"MD", 3}, {"MF", 4}, {"CNAME", 5}, {"SOA", 6}, {"MB", 7}, {"MG", 8},
	{"MR", 9}, {"NULL", 10}, {"WKS", 11}, {"PTR", 12}, {"HINFO", 13}, {"MINFO", 14}, {"MX", 15},
	{"TXT", 16}, {"RP", 17}, {"AFSDB", 18}, {"X25", 19}, {"ISDN", 20}, {"RT", 21}, {"NSAP", 22},
	{"NSAP-PTR", 23}, {"SIG", 24}, {"KEY", 25}, {"PX", 26}, {"GPOS", 27}, {"AAAA", 28}, {"LOC", 29},
	{"NXT", 30}, {"SRV", 33}, {"NAPTR", 35}, {"KX", 36}, {"CERT", 37}, {"A6", 38}, {"DNAME", 39},
	{"APL", 42}, {"DS", 43}, {"SSHFP", 44}, {"IPSECKEY", 45}, {"RRSIG", 46}, {"NSEC", 47},
	{"DNSKEY", 48}, {"DHCID", 49}, {"NSEC3", 50}, {"NSEC3PARAM", 51}, {"TLSA", 52}, {"SMIMEA", 53},
	{"HIP", 55}, {"CDS", 59}, {"CDNSKEY", 60}, {"OPENPGPKEY", 61}, {"SPF", 99}, {"NID", 104},
	{"L32", 105}, {"L64", 106}, {"LP", 107}, {"EUI48", 108}, {"EUI64", 109}, {"URI", 256},
	{"CAA", 257}, {"AVC", 258}, {"DOA", 259}, {"DLV", 32769}, {"TYPE1000", 1000},
}

func allGenTests() []genTest {
	all := append([]genTest(nil), genTests...)
	for _, tt := range genTypeTests {
		all = append(all, genTest{name: tt.name, qtype: tt.qtype})
	}
	return all
}

// genQuery builds the packet genreport's dotest() sends for g with ID id.
func genQuery(g genTest, id uint16) []byte {
	b := make([]byte, 12, 512)
	binary.BigEndian.PutUint16(b, id)
	if g.opcode != 0 {
		// Header only: opcode in bits 3-6, no question, no OPT.
		b[2] = byte(g.opcode&0xF) << 3
	} else {
		binary.BigEndian.PutUint16(b[4:], 1) // QDCOUNT
	}
	// res_mkquery sets RD; genreport then sets or clears it and sets the
	// table's other bits (never AA).
	if g.tc {
		b[2] |= 0x02
	}
	if g.rd {
		b[2] |= 0x01
	}
	if g.ra {
		b[3] |= 0x80
	}
	if g.z {
		b[3] |= 0x40
	}
	if g.ad {
		b[3] |= 0x20
	}
	if g.cd {
		b[3] |= 0x10
	}
	if g.opcode != 0 {
		return b
	}
	for _, l := range strings.Split(genZone, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, g.qtype)
	b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
	if g.udpsize > 0 {
		binary.BigEndian.PutUint16(b[10:], 1) // ARCOUNT
		b = append(b, 0)                      // owner "."
		b = binary.BigEndian.AppendUint16(b, dns.TypeOPT)
		b = binary.BigEndian.AppendUint16(b, g.udpsize)
		b = binary.BigEndian.AppendUint32(b, uint32(g.version)<<16|uint32(g.flags))
		b = binary.BigEndian.AppendUint16(b, uint16(len(g.opts)))
		b = append(b, g.opts...)
	}
	return b
}

// genRun sends g's query to addr as genreport does and judges the answer.
func genRun(g genTest, addr netip.AddrPort) string {
	id := uint16(rand.N(0x10000))
	pkt := genQuery(g, id)
	if g.tcp {
		return genTCP(g, addr, pkt)
	}
	c, err := net.Dial("udp", addr.String()) // connected: other sources are filtered
	if err != nil {
		return "failed"
	}
	defer c.Close()
	buf := make([]byte, 65536)
	for try := 0; try < 3; try++ {
		if _, err := c.Write(pkt); err != nil {
			return "failed"
		}
		deadline := time.Now().Add(time.Second)
		c.SetReadDeadline(deadline)
		for {
			n, err := c.Read(buf)
			if err != nil {
				if isTimeout(err) {
					break // resend
				}
				if errors.Is(err, syscall.ECONNREFUSED) {
					return "port-unreachable"
				}
				return "failed"
			}
			resp := buf[:n]
			// Dropped silently: short, not a response, another ID.
			if n < 12 || resp[2]&0x80 == 0 || binary.BigEndian.Uint16(resp) != id {
				continue
			}
			if g.opcode == 0 {
				if ok, err := genQuestionMatches(g, resp); err != nil {
					return "malformed"
				} else if !ok {
					continue // ignored over UDP
				}
			}
			if resp[2]&0x02 != 0 && !g.ignore {
				return genTCP(g, addr, pkt)
			}
			return genJudge(g, resp)
		}
	}
	return "timeout"
}

func genTCP(g genTest, addr netip.AddrPort, pkt []byte) string {
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "connection-refused"
		}
		return "failed"
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(dnstest.Frame(pkt)); err != nil {
		return "writev"
	}
	resp, err := dnstest.ReadFrame(c)
	switch {
	case err == nil:
	case isTimeout(err):
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	default:
		return "read"
	}
	if g.opcode == 0 {
		if ok, err := genQuestionMatches(g, resp); err != nil {
			return "malformed"
		} else if !ok {
			return "mismatch"
		}
	}
	return genJudge(g, resp)
}

// genQuestionMatches checks every question names the zone (any case) with
// the test's type. QDCOUNT 0 matches.
func genQuestionMatches(g genTest, resp []byte) (bool, error) {
	if len(resp) < 12 {
		return false, dns.ErrShortRead
	}
	off := 12
	for i := 0; i < int(binary.BigEndian.Uint16(resp[4:])); i++ {
		name, off1, err := dns.UnpackDomainName(resp, off)
		if err != nil || off1+4 > len(resp) {
			return false, dns.ErrBuf
		}
		if !strings.EqualFold(name, genZone+".") || binary.BigEndian.Uint16(resp[off1:]) != g.qtype {
			return false, nil
		}
		off = off1 + 4
	}
	return true, nil
}

// genParsed is what process() notes while it parses a response.
type genParsed struct {
	opcode, rcode                         int // rcode: full, with the OPT's bits
	aa, tc, rd, ra, z, ad, cd             bool
	seenopt, seensoa, seenrrsig, seentsig bool
	ednsttl                               uint32
	nsid, ecs, expire                     bool
	seencookie, goodcookie, seenecho      bool
	tags                                  []string // non-empty-*-section
}

// genParse parses resp as process() does; false means "malformed".
func genParse(g genTest, resp []byte) (p genParsed, ok bool) {
	if len(resp) < 12 {
		return p, false
	}
	p.opcode = int(resp[2]>>3) & 0xF
	p.aa, p.tc, p.rd = resp[2]&0x04 != 0, resp[2]&0x02 != 0, resp[2]&0x01 != 0
	p.ra, p.z, p.ad, p.cd = resp[3]&0x80 != 0, resp[3]&0x40 != 0, resp[3]&0x20 != 0, resp[3]&0x10 != 0
	p.rcode = int(resp[3] & 0xF)
	var counts [4]int
	for i := range counts {
		counts[i] = int(binary.BigEndian.Uint16(resp[4+2*i:]))
	}
	off := 12
	names := [4]string{"question", "answer", "authority", "additional"}
	for sec, n := range counts {
		if g.opcode != 0 && n != 0 {
			p.tags = append(p.tags, "non-empty-"+names[sec]+"-section")
			continue // not parsed
		}
		for i := 0; i < n; i++ {
			owner, off1, err := dns.UnpackDomainName(resp, off)
			if err != nil {
				return p, false
			}
			if sec == 0 {
				if off1+4 > len(resp) {
					return p, false
				}
				off = off1 + 4
				continue
			}
			if off1+10 > len(resp) {
				return p, false
			}
			rtype := binary.BigEndian.Uint16(resp[off1:])
			ttl := binary.BigEndian.Uint32(resp[off1+4:])
			rdlen := int(binary.BigEndian.Uint16(resp[off1+8:]))
			rdata := off1 + 10
			if rdata+rdlen > len(resp) {
				return p, false
			}
			if _, end, err := dns.UnpackRR(resp, off); err != nil || end != rdata+rdlen {
				return p, false // a bad RR
			}
			off = rdata + rdlen
			switch {
			case sec == 1 && rtype == dns.TypeSOA && strings.EqualFold(owner, genZone+"."):
				p.seensoa = true
			case sec == 1 && rtype == dns.TypeRRSIG:
				p.seenrrsig = true
			case rtype == dns.TypeTSIG:
				if p.seentsig {
					return p, false
				}
				p.seentsig = true
			case rtype == dns.TypeOPT:
				if p.seenopt {
					return p, false
				}
				p.seenopt = true
				p.ednsttl = ttl
				p.rcode += int(ttl>>24) << 4
				if !genOptions(&p, resp[rdata:rdata+rdlen]) {
					return p, false
				}
			}
		}
	}
	if off != len(resp) {
		return p, false // trailing bytes
	}
	return p, true
}

func genOptions(p *genParsed, rd []byte) bool {
	for len(rd) > 0 {
		if len(rd) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(rd), int(binary.BigEndian.Uint16(rd[2:]))
		if 4+n > len(rd) {
			return false
		}
		data := rd[4 : 4+n]
		switch code {
		case 3:
			p.nsid = p.nsid || n > 0
		case 8:
			p.ecs = true
		case 9:
			p.expire = p.expire || n == 4
		case 10:
			if n >= 16 && n <= 40 {
				p.seencookie = true
				p.goodcookie = bytes.Equal(data[:8], genClient)
			}
		case 100:
			p.seenecho = true
		}
		rd = rd[4+n:]
	}
	return true
}

var genRcodeNames = map[int]string{
	0: "noerror", 1: "formerr", 2: "servfail", 3: "nxdomain", 4: "notimp", 5: "refused",
	6: "yxdomain", 7: "yxrrset", 8: "nxrrset", 9: "notauth", 10: "notzone", 16: "badvers", 23: "badcookie",
}

func genRcode(rc int) string {
	if n, ok := genRcodeNames[rc]; ok {
		return n
	}
	return fmt.Sprintf("rcode%d", rc)
}

func genOpcode(op int) string {
	switch op {
	case 0:
		return "query"
	case 1:
		return "iquery"
	case 2:
		return "status"
	case 4:
		return "notify"
	case 5:
		return "update"
	}
	return fmt.Sprintf("opcode%d", op)
}

// genJudge is process()'s evaluation of a response to g, without -R.
func genJudge(g genTest, resp []byte) string {
	p, ok := genParse(g, resp)
	if !ok {
		return "malformed"
	}
	const badcookie = 23
	tags := p.tags
	pass := len(tags) == 0
	fail := func(tag string) { tags = append(tags, tag); pass = false }
	sentCookie := g.sentCookie()
	if sentCookie && p.seencookie && !p.goodcookie {
		pass = false // cookie-mismatch, tagged with the informational tags
	}
	if p.opcode != g.opcode {
		fail(genOpcode(p.opcode)) // 1
	}
	rcodeTagged := false
	if g.version == 0 { // 2
		switch {
		case g.opcode == 0 && p.rcode == dns.RcodeSuccess:
		case g.opcode == 0 && g.cookieTest && p.rcode == badcookie && p.seencookie:
		case g.opcode != 0 && p.rcode == dns.RcodeNotImplemented:
		default:
			fail(genRcode(p.rcode))
			rcodeTagged = true
		}
	}
	if p.seentsig { // 3: a TSIG to a query without one is never right
		if !rcodeTagged && p.rcode != dns.RcodeNotAuth {
			fail(genRcode(p.rcode))
		}
		fail("tsig")
	}
	if g.version != 0 && p.rcode != dns.RcodeBadVers { // 4
		fail(genRcode(p.rcode))
	}
	optVersion := uint8(p.ednsttl >> 16)
	if p.seenopt && optVersion != 0 { // 5
		fail("version-not-zero")
	}
	if p.seenopt && ((optVersion < g.version && p.rcode != dns.RcodeBadVers) ||
		(optVersion >= g.version && p.rcode == dns.RcodeBadVers)) { // 6
		fail("badversion")
	}
	if g.udpsize > 0 && !p.seenopt { // 7
		fail("noopt")
	}
	if g.udpsize == 0 && p.seenopt { // 8
		fail("opt")
	}
	if g.qtype == dns.TypeSOA && g.version == 0 && !g.ignore && !p.seensoa && p.rcode == dns.RcodeSuccess { // 9
		fail("nosoa")
	}
	if g.qtype == dns.TypeSOA && p.seensoa && (g.version != 0 || p.rcode != dns.RcodeSuccess) { // 10
		fail("soa")
	}
	if p.seenecho { // 11
		fail("echoed")
	}
	queryDO := g.flags&ednsDO != 0
	respDO := p.ednsttl&ednsDO != 0
	if queryDO && p.seenopt && !respDO && p.seenrrsig { // 12
		fail("nodo")
	}
	if queryDO && g.cd && respDO && !p.cd && p.seenrrsig { // 13
		fail("nocd")
	}
	if !p.aa && g.version == 0 && p.rcode == dns.RcodeSuccess && g.opcode == 0 { // 14
		fail("noaa")
	}
	if p.aa && g.opcode != 0 { // 15
		fail("aa")
	}
	if p.ra && g.opcode != 0 { // 16
		fail("ra")
	}
	if p.rd && (g.opcode != 0 || !g.rd) { // 17
		fail("rd")
	}
	if !p.rd && g.rd && g.opcode == 0 { // 18
		fail("nord")
	}
	if p.ad && (g.opcode != 0 || (!g.ad && !queryDO)) { // 19
		fail("ad")
	}
	if p.cd && (g.opcode != 0 || !g.cd) { // 20
		fail("cd")
	}
	if p.z { // 21
		fail("z")
	}
	if p.ednsttl&0x7FFF != 0 { // 22
		fail("mbz")
	}
	if g.ignore && len(resp) > int(g.udpsize) { // 23
		fail("toobig")
	}
	if pass { // 24
		tags = append([]string{"ok"}, tags...)
	}
	// 25: informational tags.
	if p.nsid {
		tags = append(tags, "nsid")
	}
	if p.expire {
		tags = append(tags, "expire")
	}
	switch {
	case sentCookie && p.seencookie && p.goodcookie && p.rcode == badcookie:
		tags = append(tags, "cookie+badcookie")
	case sentCookie && p.seencookie && p.goodcookie:
		tags = append(tags, "cookie")
	case sentCookie && p.seencookie && p.rcode == badcookie:
		tags = append(tags, "cookie-mismatch+badcookie")
	case sentCookie && p.seencookie:
		tags = append(tags, "cookie-mismatch")
	case !sentCookie && p.seencookie:
		tags = append(tags, "cookie")
	}
	if p.ecs {
		tags = append(tags, "subnet")
	}
	return strings.Join(tags, ",")
}

// genPasses is genreport's own pass rule (what -B hides).
func genPasses(result string) bool {
	return result == "ok" || strings.HasPrefix(result, "ok,")
}

// TestGenreport runs every genreport test that applies to steer against a
// running server, over IPv4 and IPv6.
func TestGenreport(t *testing.T) {
	s := startServer(t, srvOpts{})
	for _, g := range allGenTests() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tg := range targets(s) {
				got := genRun(g, tg.addr)
				if !genPasses(got) {
					t.Errorf("%s: %s=%s, which genreport reports as a failure", tg.name, g.name, got)
					continue
				}
				// The informational tags: those expected, and "subnet" when
				// the test sent ECS (support for it is optional).
				tags := strings.Split(got, ",")[1:]
				for _, want := range g.info {
					if !slices.Contains(tags, want) {
						t.Errorf("%s: %s=%s, want the tag %s", tg.name, g.name, got, want)
					}
				}
				for _, tag := range tags {
					if !slices.Contains(g.info, tag) && !(tag == "subnet" && g.sentECS()) {
						t.Errorf("%s: %s=%s: unexpected tag %s", tg.name, g.name, got, tag)
					}
				}
			}
		})
	}
}

// TestGenreportQueryBytes pins genQuery to the bytes genreport writes.
func TestGenreportQueryBytes(t *testing.T) {
	find := func(name string) genTest {
		for _, g := range allGenTests() {
			if g.name == name {
				return g
			}
		}
		t.Fatalf("no test %s", name)
		return genTest{}
	}
	q := "\x07example\x03com\x00"
	cases := map[string]string{
		"dns":       "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00" + q + "\x00\x06\x00\x01",
		"aa":        "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00" + q + "\x00\x06\x00\x01",
		"zflag":     "\x12\x34\x00\x40\x00\x01\x00\x00\x00\x00\x00\x00" + q + "\x00\x06\x00\x01",
		"opcode":    "\x12\x34\x78\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"opcodeflg": "\x12\x34\x7b\xf0\x00\x00\x00\x00\x00\x00\x00\x00",
		"type666":   "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00" + q + "\x02\x9a\x00\x01",
		"edns1":     "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x06\x00\x01" + "\x00\x00\x29\x10\x00\x00\x01\x00\x00\x00\x00",
		"ednsflags": "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x06\x00\x01" + "\x00\x00\x29\x10\x00\x00\x00\x00\x80\x00\x00",
		"edns@512":  "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x30\x00\x01" + "\x00\x00\x29\x02\x00\x00\x00\x00\x00\x00\x00",
		"ednstcp":   "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x30\x00\x01" + "\x00\x00\x29\x02\x00\x00\x00\x80\x00\x00\x00",
		"dig11": "\x12\x34\x01\x20\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x06\x00\x01" + "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x0c" +
			"\x00\x0a\x00\x08\x01\x02\x03\x04\x05\x06\x07\x08",
		"optlist": "\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + q + "\x00\x06\x00\x01" + "\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x1c" +
			"\x00\x03\x00\x00" + "\x00\x08\x00\x04\x00\x01\x00\x00" + "\x00\x09\x00\x00" + "\x00\x0a\x00\x08\x01\x02\x03\x04\x05\x06\x07\x08",
	}
	for name, wantBytes := range cases {
		if got := genQuery(find(name), 0x1234); !bytes.Equal(got, []byte(wantBytes)) {
			t.Errorf("%s:\n got % x\nwant % x", name, got, []byte(wantBytes))
		}
	}
}

// TestGenreportJudge checks the judge against responses with known faults,
// so that TestGenreport's "ok" means what genreport's would.
func TestGenreportJudge(t *testing.T) {
	h := newTestHandler(t, srvOpts{})
	find := func(name string) genTest {
		for _, g := range allGenTests() {
			if g.name == name {
				return g
			}
		}
		t.Fatalf("no test %s", name)
		return genTest{}
	}
	// respond answers g with steer's handler, then lets mutate change the
	// unpacked response before it is packed again.
	respond := func(g genTest, mutate func(m *dns.Msg)) []byte {
		out := h.HandleFrom(genQuery(g, 7), dnsserver.UDP, netip.Addr{}, nil)
		if mutate == nil {
			return out
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatal(err)
		}
		mutate(m)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	addOpt := func(m *dns.Msg, o dns.EDNS0) { m.IsEdns0().Option = append(m.IsEdns0().Option, o) }
	soa := func(m *dns.Msg) { m.Answer = []dns.RR{mustRR(t, soaRR)} }
	cases := []struct {
		test   string
		mutate func(m *dns.Msg)
		raw    func(b []byte) []byte
		want   string
	}{
		{"dns", nil, nil, "ok"},
		{"dns", func(m *dns.Msg) { m.Authoritative = false }, nil, "noaa"},
		{"dns", func(m *dns.Msg) { m.Rcode = dns.RcodeRefused; m.Authoritative = false; m.Answer = nil }, nil, "refused"},
		{"dns", func(m *dns.Msg) { m.Zero = true }, nil, "z"},
		{"dns", func(m *dns.Msg) { m.RecursionDesired = true }, nil, "rd"},
		{"dns", func(m *dns.Msg) { m.RecursionAvailable = true }, nil, "ok"},
		{"dns", func(m *dns.Msg) { m.AuthenticatedData = true }, nil, "ad"},
		{"dns", func(m *dns.Msg) { m.CheckingDisabled = true }, nil, "cd"},
		{"dns", func(m *dns.Msg) { m.Answer = nil }, nil, "nosoa"},
		{"dns", func(m *dns.Msg) { m.SetEdns0(1232, false) }, nil, "opt"},
		{"dns", func(m *dns.Msg) { m.Opcode = dns.OpcodeStatus }, nil, "status"},
		{"dns", nil, func(b []byte) []byte { return append(b, 0) }, "malformed"},
		{"cd", func(m *dns.Msg) { m.CheckingDisabled = true }, nil, "ok"},
		{"ad", func(m *dns.Msg) { m.AuthenticatedData = true }, nil, "ok"},
		{"rd", func(m *dns.Msg) { m.RecursionDesired = false }, nil, "nord"},
		{"edns", func(m *dns.Msg) { m.Extra = nil }, nil, "noopt"},
		{"edns", func(m *dns.Msg) { m.Rcode = dns.RcodeBadVers; m.Answer = nil }, nil, "badvers,badversion"},
		{"edns", func(m *dns.Msg) { m.IsEdns0().SetVersion(1) }, nil, "version-not-zero"},
		{"edns", func(m *dns.Msg) { m.Extra = append(m.Extra, bareOPT()) }, nil, "malformed"},
		{"edns1", func(m *dns.Msg) { m.Rcode = dns.RcodeSuccess; soa(m) }, nil, "noerror,badversion,soa"},
		{"edns1", func(m *dns.Msg) { soa(m) }, nil, "soa"},
		{"ednsopt", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_LOCAL{Code: 100}) }, nil, "echoed"},
		{"ednsflags", func(m *dns.Msg) { m.IsEdns0().Hdr.Ttl |= 0x0080 }, nil, "mbz"},
		{"do", func(m *dns.Msg) { m.IsEdns0().SetDo(false) }, nil, "ok"},
		{"ednsnsid", nil, nil, "ok,nsid"},
		{"ednsexpire", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_EXPIRE{Code: dns.EDNS0EXPIRE, Expire: 3600}) }, nil, "ok,expire"},
		{"ednssubnet", func(m *dns.Msg) {
			addOpt(m, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, Address: net.IPv4zero})
		}, nil, "ok,subnet"},
		{"ednscookie", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_COOKIE{Code: 10, Cookie: "0102030405060708aabbccddeeff0011"}) }, nil, "ok,cookie"},
		{"ednscookie", func(m *dns.Msg) {
			m.Rcode = 23
			m.Answer = nil
			addOpt(m, &dns.EDNS0_COOKIE{Code: 10, Cookie: "0102030405060708aabbccddeeff0011"})
		}, nil, "ok,cookie+badcookie"},
		{"ednscookie", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_COOKIE{Code: 10, Cookie: "ffffffffffffffffaabbccddeeff0011"}) }, nil, "cookie-mismatch"},
		{"ednscookie", func(m *dns.Msg) { m.Rcode = 23; m.Answer = nil }, nil, "badcookie"},
		{"edns", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_COOKIE{Code: 10, Cookie: "0102030405060708aabbccddeeff0011"}) }, nil, "ok,cookie"},
		{"edns1cookie", func(m *dns.Msg) { addOpt(m, &dns.EDNS0_COOKIE{Code: 10, Cookie: "ffffffffffffffffaabbccddeeff0011"}) }, nil, "cookie-mismatch"},
		{"opcode", nil, nil, "ok"},
		{"opcode", func(m *dns.Msg) { m.Rcode = dns.RcodeFormatError }, nil, "formerr"},
		{"opcode", func(m *dns.Msg) { m.Opcode = 0 }, nil, "query"},
		{"opcode", func(m *dns.Msg) { m.Authoritative, m.RecursionAvailable = true, true }, nil, "aa,ra"},
		{"opcodeflg", func(m *dns.Msg) { m.RecursionDesired = true }, nil, "rd"},
		{"opcode", func(m *dns.Msg) { m.Question = []dns.Question{{Name: "example.com.", Qtype: 6, Qclass: 1}} }, nil, "malformed"},
		{"edns@512", func(m *dns.Msg) {
			m.Rcode = dns.RcodeSuccess
			m.Ns = nil
			m.Answer = []dns.RR{mustRR(t, `example.com. 1 IN TXT "`+strings.Repeat("x", 250)+`" "`+strings.Repeat("x", 250)+`"`)}
		}, nil, "toobig"},
	}
	for i, c := range cases {
		g := find(c.test)
		resp := respond(g, c.mutate)
		if c.raw != nil {
			resp = c.raw(resp)
		}
		if got := genJudge(g, resp); got != c.want {
			t.Errorf("case %d (%s): judged %q, want %q", i, c.test, got, c.want)
		}
	}
}

// TestGenreportWithCookies runs genreport's cookie tests against a server
// answering cookies: each must pass with the tag "cookie" (a good server
// cookie for genreport's client cookie), as BIND, NSD and Knot do.
func TestGenreportWithCookies(t *testing.T) {
	s := startServer(t, srvOpts{})
	s.Handler().SetGuard(&dnsserver.Guard{Cookies: cookie.Random()})
	for _, g := range allGenTests() {
		if !g.sentCookie() {
			continue
		}
		for _, tg := range targets(s) {
			got := genRun(g, tg.addr)
			tags := strings.Split(got, ",")
			if !genPasses(got) || !slices.Contains(tags, "cookie") {
				t.Errorf("%s: %s=%s, want ok with the tag cookie", tg.name, g.name, got)
			} else {
				t.Logf("%s: %s=%s", tg.name, g.name, got)
			}
		}
	}
}
