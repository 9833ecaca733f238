package difftest

import (
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/qtype"
)

// question is one query asked of every server.
type question struct {
	name  string
	qtype uint16
	edns  bool // an OPT record, UDP size 1232
	do    bool // the DNSSEC OK bit
	tcp   bool
	ecs   string // a client subnet option, when set
	from  string // what made it: a zone, or a PowerDNS test
}

func (q question) String() string {
	s := q.name + " " + typeString(q.qtype)
	if !q.edns {
		s += " noedns"
	}
	if q.do {
		s += " +dnssec"
	}
	if q.tcp {
		s += " +tcp"
	}
	if q.ecs != "" {
		s += " +subnet=" + q.ecs
	}
	return s + " (" + q.from + ")"
}

func typeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// msg builds the query.
func (q question) msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	m.RecursionDesired = false
	if q.edns {
		m.SetEdns0(1232, q.do)
		if q.ecs != "" {
			_, n, err := net.ParseCIDR(q.ecs)
			if err == nil {
				ones, _ := n.Mask.Size()
				fam := uint16(1)
				if n.IP.To4() == nil {
					fam = 2
				}
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(ones), Address: n.IP})
			}
		}
	}
	return m
}

// baseTypes are asked at every owner name, beside the types it has.
var baseTypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeNS, dns.TypeSOA,
	dns.TypeCNAME, dns.TypeSRV, dns.TypeANY, dns.TypeDS, 65280}

// sameShape folds the digits of a name, so that 20,000 host-N names are
// asked about a few at a time.
var sameShape = regexp.MustCompile(`[0-9]+`)

// zoneQuestions makes the questions for one zone from its records (as
// Knot transfers them): every owner name (at most 20 of one shape) with
// its types and the base types; names below wildcards, below delegations
// and DNAMEs, and at empty non-terminals; names that do not exist at several depths.
// Some are in mixed case, some without EDNS or with DO, some over TCP.
func zoneQuestions(r *rand.Rand, origin string, rrs []dns.RR) []question {
	types := map[string]map[uint16]bool{}
	var owners []string
	cuts := map[string]bool{}
	for _, rr := range rrs {
		h := rr.Header()
		o := strings.ToLower(h.Name)
		if types[o] == nil {
			types[o] = map[uint16]bool{}
			owners = append(owners, o)
		}
		types[o][h.Rrtype] = true
		if h.Rrtype == dns.TypeNS && o != origin {
			cuts[o] = true
		}
	}
	shapes := map[string]int{}
	var qs []question
	add := func(name string, ts ...uint16) {
		for _, t := range ts {
			qs = append(qs, question{name: name, qtype: t, from: strings.TrimSuffix(origin, ".")})
		}
	}
	ents := map[string]bool{}
	for _, o := range owners {
		shapes[sameShape.ReplaceAllString(o, "#")]++
		if shapes[sameShape.ReplaceAllString(o, "#")] > 20 {
			continue
		}
		ts := slices.Clone(baseTypes)
		for t := range types[o] {
			if !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
		add(o, ts...)
		if strings.HasPrefix(o, "*.") {
			rest := o[2:]
			add("x."+rest, dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeCNAME, dns.TypeANY, dns.TypeSRV)
			add("a.b."+rest, dns.TypeA, dns.TypeTXT, dns.TypeCNAME)
		}
		if types[o][dns.TypeDNAME] {
			add("x."+o, dns.TypeA, dns.TypeCNAME, dns.TypeDNAME, dns.TypeTXT, dns.TypeDS)
			add("x.y."+o, dns.TypeA, dns.TypeCNAME)
		}
		if cuts[o] {
			add("www."+o, dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeDS, dns.TypeTXT)
			add("a.b."+o, dns.TypeA, dns.TypeDS)
		}
		if o != origin {
			add("nx."+o, dns.TypeA, dns.TypeTXT)
		}
		for p := parent(o); p != "" && p != origin && dns.IsSubDomain(origin, p); p = parent(p) {
			if types[p] == nil {
				ents[p] = true
			}
		}
	}
	for e := range ents {
		add(e, dns.TypeA, dns.TypeTXT, dns.TypeANY, dns.TypeNS, dns.TypeDS)
	}
	add("nx."+origin, dns.TypeA, dns.TypeMX, dns.TypeTXT, dns.TypeSOA)
	add("nx1.nx2."+origin, dns.TypeA, dns.TypeAAAA)
	add("a.b.c.d.nx."+origin, dns.TypeA)
	for i := range qs {
		vary(r, &qs[i])
	}
	return qs
}

// vary sets the transport and EDNS flags and the case of a question.
func vary(r *rand.Rand, q *question) {
	q.edns = r.IntN(5) > 0
	q.do = q.edns && r.IntN(8) == 0
	q.tcp = r.IntN(6) == 0
	if r.IntN(4) == 0 {
		b := []byte(q.name)
		for i, c := range b {
			if c >= 'a' && c <= 'z' && r.IntN(2) == 0 {
				b[i] = c - 'a' + 'A'
			}
		}
		q.name = string(b)
	}
}

func parent(name string) string {
	i := strings.IndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return name[i+1:]
}

// pdnsQuestions reads pdns-queries.tsv: PowerDNS's own test queries with
// their dnssec, tcp and ecs= flags.
func pdnsQuestions(t *testing.T, dir string) []question {
	t.Helper()
	var qs []question
	for _, f := range readTSV(t, dir, "pdns-queries.tsv", "test", "name", "type", "flags") {
		line := strings.Join(f, " ")
		qt, ok := parseType(f[2])
		if !ok {
			t.Fatalf("pdns-queries.tsv: %q: unknown type %q", line, f[2])
		}
		q := question{name: f[1], qtype: qt, edns: true, from: "pdns " + f[0]}
		for _, flag := range strings.Split(f[3], ",") {
			switch {
			case flag == "-":
			case flag == "dnssec":
				q.do = true
			case flag == "tcp":
				q.tcp = true
			case strings.HasPrefix(flag, "ecs="):
				q.ecs = strings.TrimPrefix(flag, "ecs=")
			default:
				t.Fatalf("pdns-queries.tsv: %q: unknown flag %q", line, flag)
			}
		}
		qs = append(qs, q)
	}
	return qs
}

// parseType reads a type mnemonic or TYPEnnn (RFC 3597); WALLET (262) is
// newer than miekg/dns.
func parseType(s string) (uint16, bool) {
	if t, err := qtype.Parse(s); err == nil {
		return t, true
	}
	if strings.EqualFold(s, "WALLET") {
		return 262, true
	}
	return 0, false
}
