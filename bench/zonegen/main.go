// Command zonegen is the large-zone benchmark's helper (bench/zonescale.sh).
//
//	zonegen gen   -records N [-origin big.test.] [-seed 1] -out DIR
//	zonegen check -server HOST:PORT -probes DIR/probes.tsv [-version 1|2]
//	zonegen watch -server HOST:PORT -name NAME -want "RDATA ..." -sid PID [...] [-- COMMAND ...]
//	zonegen many  -zones N -out DIR
//
// many writes N small zones of ten records for bench/manyzones.sh (see
// many.go); check takes its probes as gen's.
//
// gen writes one plain zone of exactly N resource records, the same for
// every server: SOA, apex NS/MX/TXT, mostly A and AAAA hosts several labels
// deep (so the zone has empty non-terminals), some CNAMEs (in and out of
// the zone), TXT and MX, a few delegations with glue and a wildcard. It is
// deterministic for a seed. It writes DIR/zone (serial S), DIR/zone.v2 (the
// same with serial S+1 and one A record changed) and DIR/probes.tsv, and
// prints the probes: (label, name, type, kind, rcode, expected answer in
// version 1, in version 2). The probe "last" is the last record written,
// "changed" the record the second version changes.
//
// check asks one server every probe and compares the whole answer (or the
// referral's NS and glue, or the negative answer's SOA) with the expected
// one. It prints "ok n/n" or "WRONG k/n" and each mismatch, and exits 1
// when any is wrong. An answer that has a CNAME but not its in-zone target
// passes (a resolver asks for the target itself; RFC 1034 §4.3.2 has the
// server follow it) and is named in the summary line as not followed.
//
// watch times one event and samples memory meanwhile. From -since (Unix
// nanoseconds; now when 0) it asks NAME every -interval until the answer's
// RDATA of -type is -want (sorted, space separated), runs COMMAND (if any)
// at the start, and samples the RSS summed over every process of session
// -sid every -sample. It goes on for -after past the later of the answer
// and COMMAND's end, and prints one line of key=value results (seconds are
// from the start): answer_s, cmd_s, cmd_rc, cpu_s (utime+stime of the
// session's live processes at the answer), peak_kib, peak_s, end_kib, and
// with -steady KIB also back_s: when RSS came back within 10 % of KIB for
// good (0: it never left; -1: not by the end). -samples FILE gets each
// sample as "seconds<TAB>KiB".
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	case "watch":
		err = watch(os.Args[2:])
	case "many":
		err = many(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zonegen:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: zonegen gen|check|watch|many [flags] (see the package comment)")
	os.Exit(2)
}

// ---- gen --------------------------------------------------------------------

const serial = 2026120101

var (
	regions  = []string{"eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south", "me-central", "ca-central", "au-east", "jp-east"}
	prefixes = []string{"web", "app", "api", "db", "cache", "mq", "lb", "vm", "node", "edge", "git", "ci", "mon", "log", "auth", "img"}
	envs     = []string{"prod", "staging", "dev"}
	ttls     = []int{60, 300, 300, 3600, 3600, 3600, 86400}
)

// host is a name with its A addresses, a CNAME or MX target.
type host struct {
	name  string
	addrs []string
}

// probe is one question and its expected answers in both versions.
type probe struct {
	label, name, qtype, kind, rcode string
	want1, want2                    []string // normalised RRs, see key
}

// generator writes both versions of the zone line by line; they differ in
// the SOA and in the changed record only.
type generator struct {
	origin   string
	v1, v2   *bufio.Writer
	rng      *rand.Rand
	n        int // records written
	host     int // host counter, unique names
	recentA  []host
	probes   map[string]*probe
	order    []string
	changeAt int
	lastName string
	lastA    string
}

// rr writes one record (owner relative to the origin, "@" for the apex);
// alt, when not "", is the second version's RDATA.
func (g *generator) rr(owner string, ttl int, typ, rdata, alt string) {
	g.n++
	fmt.Fprintf(g.v1, "%s %d IN %s %s\n", owner, ttl, typ, rdata)
	if alt == "" {
		alt = rdata
	}
	fmt.Fprintf(g.v2, "%s %d IN %s %s\n", owner, ttl, typ, alt)
}

func (g *generator) abs(owner string) string {
	if owner == "@" {
		return g.origin
	}
	if strings.HasSuffix(owner, ".") {
		return owner
	}
	return owner + "." + g.origin
}

// key normalises one record for comparison: owner, type and RDATA in lower
// case, no TTL or class.
func key(rr dns.RR) string {
	h := rr.Header()
	rdata := strings.TrimPrefix(rr.String(), h.String())
	return strings.ToLower(strings.TrimSuffix(h.Name, ".") + ". " + dns.TypeToString[h.Rrtype] + " " + rdata)
}

// mustKey is key of a record given as zone text (absolute owner).
func mustKey(text string) string {
	rr, err := dns.NewRR(text)
	if err != nil || rr == nil {
		panic(fmt.Sprintf("bad probe record %q: %v", text, err))
	}
	return key(rr)
}

func (g *generator) addProbe(label, name, qtype, kind, rcode string, want1, want2 []string) {
	if _, ok := g.probes[label]; ok {
		return
	}
	k1 := make([]string, len(want1))
	for i, t := range want1 {
		k1[i] = mustKey(t)
	}
	k2 := k1
	if want2 != nil {
		k2 = make([]string, len(want2))
		for i, t := range want2 {
			k2[i] = mustKey(t)
		}
	}
	sort.Strings(k1)
	sort.Strings(k2)
	g.probes[label] = &probe{label, g.abs(name), qtype, kind, rcode, k1, k2}
	g.order = append(g.order, label)
}

func a4(i int) string   { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
func a4rr(i int) string { return fmt.Sprintf("100.%d.%d.%d", 64+(i>>16&63), i>>8&255, i&255) }
func a6(i int) string   { return fmt.Sprintf("2001:db8:%x:%x::1", i>>16&0xffff, i&0xffff) }
func soa(s int) string  { return fmt.Sprintf("ns1 hostmaster %d 7200 3600 1209600 300", s) }
func soaAbs(o string, s int) string {
	return fmt.Sprintf("%s 300 IN SOA ns1.%s hostmaster.%s %d 7200 3600 1209600 300", o, o, o, s)
}

func (g *generator) hostName() (name, site string) {
	g.host++
	region := regions[g.rng.IntN(len(regions))]
	site = fmt.Sprintf("dc%02d.%s", g.rng.IntN(40), region)
	p := prefixes[g.rng.IntN(len(prefixes))]
	if g.rng.IntN(100) < 15 { // deeper: service names under k8s.<site>
		return fmt.Sprintf("%s-%d.%s.k8s.%s", p, g.host, envs[g.rng.IntN(len(envs))], site), site
	}
	return fmt.Sprintf("%s-%d.%s", p, g.host, site), site
}

func (g *generator) ttl() int { return ttls[g.rng.IntN(len(ttls))] }

// aOnly writes a host with one A record (changed in version 2 when it is
// the chosen one) and remembers it as a CNAME or MX target.
func (g *generator) aOnly() {
	name, _ := g.hostName()
	ttl := g.ttl()
	addr := a4(g.host)
	alt := ""
	if g.changeAt >= 0 && g.n >= g.changeAt {
		alt = "198.51.100.222"
		g.changeAt = -1
		g.addProbe("changed", name, "A", "answer", "NOERROR",
			[]string{g.abs(name) + " 60 IN A " + addr}, []string{g.abs(name) + " 60 IN A " + alt})
	}
	g.rr(name, ttl, "A", addr, alt)
	g.lastName, g.lastA = name, addr
	if alt == "" { // the changed host is no target: its answer moves
		g.remember(name, addr)
	}
}

func (g *generator) remember(name string, addrs ...string) {
	h := host{name, addrs}
	if len(g.recentA) < 64 {
		g.recentA = append(g.recentA, h)
	} else {
		g.recentA[g.rng.IntN(64)] = h
	}
}

// body writes one host of the mix; mid says it is past the first third of
// the zone, where the probes are taken.
func (g *generator) body(mid bool) {
	r := g.rng.IntN(100)
	switch {
	case r < 50:
		g.aOnly()
	case r < 70: // A and AAAA
		name, _ := g.hostName()
		ttl := g.ttl()
		g.rr(name, ttl, "A", a4(g.host), "")
		g.rr(name, ttl, "AAAA", a6(g.host), "")
		if mid {
			g.addProbe("aaaa", name, "AAAA", "answer", "NOERROR", []string{g.abs(name) + " 60 IN AAAA " + a6(g.host)}, nil)
		}
		g.remember(name, a4(g.host))
	case r < 76: // AAAA only
		name, _ := g.hostName()
		g.rr(name, g.ttl(), "AAAA", a6(g.host), "")
	case r < 84: // CNAME, mostly to a host of the zone
		name, _ := g.hostName()
		if len(g.recentA) > 0 && g.rng.IntN(100) < 85 {
			t := g.recentA[g.rng.IntN(len(g.recentA))]
			g.rr(name, 300, "CNAME", t.name, "")
			if mid {
				want := []string{g.abs(name) + " 300 IN CNAME " + g.abs(t.name)}
				for _, a := range t.addrs {
					want = append(want, g.abs(t.name)+" 60 IN A "+a)
				}
				g.addProbe("cname-in", name, "A", "answer", "NOERROR", want, nil)
			}
		} else {
			t := fmt.Sprintf("%s-%d.cdn.example.net.", prefixes[g.rng.IntN(len(prefixes))], g.rng.IntN(10000))
			g.rr(name, 300, "CNAME", t, "")
			if mid {
				g.addProbe("cname-out", name, "A", "answer", "NOERROR", []string{g.abs(name) + " 300 IN CNAME " + t}, nil)
			}
		}
	case r < 90: // A and TXT
		name, _ := g.hostName()
		ttl := g.ttl()
		txt := fmt.Sprintf(`"v=host1; id=%d; owner=team-%d"`, g.host, g.rng.IntN(500))
		g.rr(name, ttl, "A", a4(g.host), "")
		g.rr(name, ttl, "TXT", txt, "")
		if mid {
			g.addProbe("txt", name, "TXT", "answer", "NOERROR", []string{g.abs(name) + " 60 IN TXT " + txt}, nil)
		}
		g.remember(name, a4(g.host))
	case r < 94: // two A records
		name, _ := g.hostName()
		ttl := g.ttl()
		g.rr(name, ttl, "A", a4(g.host), "")
		g.rr(name, ttl, "A", a4rr(g.host), "")
		if mid {
			g.addProbe("a-rrset", name, "A", "answer", "NOERROR",
				[]string{g.abs(name) + " 60 IN A " + a4(g.host), g.abs(name) + " 60 IN A " + a4rr(g.host)}, nil)
		}
		g.remember(name, a4(g.host), a4rr(g.host))
	case r < 97: // a mail host: A and two MX
		name, _ := g.hostName()
		ttl := g.ttl()
		g.rr(name, ttl, "A", a4(g.host), "")
		g.rr(name, ttl, "MX", "10 mail."+g.origin, "")
		g.rr(name, ttl, "MX", "20 "+name, "")
		if mid {
			g.addProbe("mx", name, "MX", "answer", "NOERROR",
				[]string{g.abs(name) + " 60 IN MX 10 mail." + g.origin, g.abs(name) + " 60 IN MX 20 " + g.abs(name)}, nil)
		}
		g.remember(name, a4(g.host))
	default: // TXT only
		name, _ := g.hostName()
		g.rr(name, g.ttl(), "TXT", fmt.Sprintf(`"site-verification=%016x"`, g.rng.Uint64()), "")
	}
}

func (g *generator) delegation(k int) {
	_, site := g.hostName()
	child := fmt.Sprintf("team%d.%s", k, site)
	g.rr(child, 86400, "NS", "ns1."+child, "")
	g.rr(child, 86400, "NS", "ns2."+child, "")
	g.rr("ns1."+child, 86400, "A", fmt.Sprintf("172.16.%d.1", k), "")
	g.rr("ns2."+child, 86400, "A", fmt.Sprintf("172.16.%d.2", k), "")
	c := g.abs(child)
	g.addProbe("referral", "www."+child, "A", "referral", "NOERROR", []string{
		c + " 86400 IN NS ns1." + c, c + " 86400 IN NS ns2." + c,
		"ns1." + c + " 86400 IN A " + fmt.Sprintf("172.16.%d.1", k),
		"ns2." + c + " 86400 IN A " + fmt.Sprintf("172.16.%d.2", k),
	}, nil)
}

func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	records := fs.Int("records", 1000000, "resource records in the zone")
	origin := fs.String("origin", "big.test.", "zone origin")
	seed := fs.Uint64("seed", 1, "random seed")
	out := fs.String("out", ".", "output directory")
	fs.Parse(args)
	o := dns.Fqdn(strings.ToLower(*origin))
	const header = 11
	ndeleg := max(4, *records/50000)
	if *records < header+ndeleg*4+200 {
		return fmt.Errorf("-records %d: at least %d", *records, header+ndeleg*4+200)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	f1, err := os.Create(filepath.Join(*out, "zone"))
	if err != nil {
		return err
	}
	f2, err := os.Create(filepath.Join(*out, "zone.v2"))
	if err != nil {
		return err
	}
	g := &generator{origin: o, v1: bufio.NewWriterSize(f1, 1<<20), v2: bufio.NewWriterSize(f2, 1<<20),
		rng: rand.New(rand.NewPCG(*seed, 0x5eed)), probes: map[string]*probe{}}
	fmt.Fprintf(g.v1, "$ORIGIN %s\n$TTL 3600\n", o)
	fmt.Fprintf(g.v2, "$ORIGIN %s\n$TTL 3600\n", o)
	g.rr("@", 300, "SOA", soa(serial), soa(serial+1))
	g.rr("@", 86400, "NS", "ns1", "")
	g.rr("@", 86400, "NS", "ns2", "")
	g.rr("@", 3600, "MX", "10 mail", "")
	g.rr("@", 3600, "TXT", `"v=spf1 mx -all"`, "")
	g.rr("ns1", 86400, "A", "192.0.2.53", "")
	g.rr("ns2", 86400, "A", "198.51.100.53", "")
	g.rr("ns2", 86400, "AAAA", "2001:db8::53", "")
	g.rr("mail", 3600, "A", "192.0.2.25", "")
	g.rr("*.wild", 600, "A", "192.0.2.99", "")
	g.rr("*.wild", 600, "TXT", `"wildcard"`, "")
	if g.n != header {
		panic("header count")
	}
	g.addProbe("soa", "@", "SOA", "answer", "NOERROR", []string{soaAbs(o, serial)}, []string{soaAbs(o, serial+1)})
	g.addProbe("apex-ns", "@", "NS", "answer", "NOERROR", []string{o + " 1 IN NS ns1." + o, o + " 1 IN NS ns2." + o}, nil)
	g.addProbe("apex-mx", "@", "MX", "answer", "NOERROR", []string{o + " 1 IN MX 10 mail." + o}, nil)
	g.addProbe("apex-txt", "@", "TXT", "answer", "NOERROR", []string{o + ` 1 IN TXT "v=spf1 mx -all"`}, nil)
	g.addProbe("wildcard", "any-thing-42.wild", "A", "answer", "NOERROR", []string{"any-thing-42.wild." + o + " 1 IN A 192.0.2.99"}, nil)
	g.addProbe("wildcard-txt", "x.y.wild", "TXT", "answer", "NOERROR", []string{"x.y.wild." + o + ` 1 IN TXT "wildcard"`}, nil)

	body := *records - ndeleg*4 // records the loop writes, header included
	g.changeAt = body / 2
	nextDeleg, k := 1, 1
	for g.n < body {
		if k <= ndeleg && g.n >= nextDeleg*body/(ndeleg+1) {
			g.delegation(k)
			body += 4
			k++
			nextDeleg++
			continue
		}
		if body-g.n < 4 { // the tail: single A records, the last one probed
			g.aOnly()
			continue
		}
		g.body(g.n > body/3)
	}
	if k <= ndeleg { // not reached: every delegation sits before the tail
		return fmt.Errorf("%d delegations not written", ndeleg-k+1)
	}
	if g.n != *records {
		return fmt.Errorf("wrote %d records, want %d", g.n, *records)
	}
	last := g.abs(g.lastName)
	g.addProbe("last", g.lastName, "A", "answer", "NOERROR", []string{last + " 60 IN A " + g.lastA}, nil)
	// the last host's site and the names above it own nothing: empty non-terminals
	_, site, _ := strings.Cut(strings.TrimSuffix(last, "."+o), ".")
	if strings.HasPrefix(site, "k8s.") || strings.Contains(site, ".k8s.") {
		_, site, _ = strings.Cut(site, "k8s.")
	}
	g.addProbe("ent", site, "A", "nodata", "NOERROR", []string{soaAbs(o, serial)}, []string{soaAbs(o, serial+1)})
	g.addProbe("nxdomain", "no-such-host."+site, "A", "nxdomain", "NXDOMAIN", []string{soaAbs(o, serial)}, []string{soaAbs(o, serial+1)})
	for _, w := range []*bufio.Writer{g.v1, g.v2} {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if err := errors.Join(f1.Close(), f2.Close()); err != nil {
		return err
	}
	pf, err := os.Create(filepath.Join(*out, "probes.tsv"))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(pf)
	fmt.Fprintln(bw, "# label\tname\ttype\tkind\trcode\twant (version 1)\twant (version 2)")
	for _, l := range g.order {
		p := g.probes[l]
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", p.label, p.name, p.qtype, p.kind, p.rcode, strings.Join(p.want1, " ; "), strings.Join(p.want2, " ; "))
		fmt.Fprintln(bw, line)
		fmt.Println(line)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "zonegen: %d records, %d hosts, %d delegations, %d probes in %s\n", g.n, g.host, ndeleg, len(g.order), *out)
	return pf.Close()
}

// ---- check ------------------------------------------------------------------

func readProbes(path string) ([]probe, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ps []probe
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, " ; ")
		}
		ps = append(ps, probe{f[0], f[1], f[2], f[3], f[4], split(f[5]), split(f[6])})
	}
	return ps, nil
}

func ask(server, name string, qtype uint16, timeout time.Duration) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: timeout}
	r, _, err := c.Exchange(m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.Exchange(m, server)
	}
	return r, err
}

// got is what a probe of kind compares in r.
func got(kind string, r *dns.Msg) []string {
	var out []string
	switch kind {
	case "answer":
		for _, rr := range r.Answer {
			out = append(out, key(rr))
		}
	case "referral":
		for _, rr := range r.Ns {
			if rr.Header().Rrtype == dns.TypeNS {
				out = append(out, key(rr))
			}
		}
		for _, rr := range r.Extra {
			if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
				out = append(out, key(rr))
			}
		}
		for _, rr := range r.Answer {
			out = append(out, "answer: "+key(rr))
		}
	default: // nodata, nxdomain: the SOA, and nothing in the answer
		for _, rr := range r.Ns {
			if rr.Header().Rrtype == dns.TypeSOA {
				out = append(out, key(rr))
			}
		}
		for _, rr := range r.Answer {
			out = append(out, "answer: "+key(rr))
		}
	}
	sort.Strings(out)
	return out
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:53", "server host:port")
	path := fs.String("probes", "probes.tsv", "probes file from gen")
	version := fs.Int("version", 1, "which expected answers: 1 or 2 (after the reload)")
	timeout := fs.Duration("timeout", 2*time.Second, "per-query timeout")
	fs.Parse(args)
	ps, err := readProbes(*path)
	if err != nil {
		return err
	}
	var bad, unfollowed []string
	for _, p := range ps {
		want := p.want1
		if *version == 2 {
			want = p.want2
		}
		var r *dns.Msg
		for try := 0; try < 3; try++ {
			if r, err = ask(*server, p.name, dns.StringToType[p.qtype], *timeout); err == nil {
				break
			}
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s %s): %v", p.label, p.name, p.qtype, err))
			continue
		}
		rc := dns.RcodeToString[r.Rcode]
		aa := p.kind != "referral"
		g := got(p.kind, r)
		if rc == p.rcode && r.Authoritative == aa && p.kind == "answer" && len(g) > 0 && len(g) < len(want) && cnamesOf(want) == strings.Join(g, " ; ") {
			// The CNAME alone, its in-zone target not added: allowed (a
			// resolver asks for the target), but said.
			unfollowed = append(unfollowed, p.label)
			continue
		}
		if rc != p.rcode || r.Authoritative != aa || strings.Join(g, " ; ") != strings.Join(want, " ; ") {
			bad = append(bad, fmt.Sprintf("%s (%s %s): got %s aa=%v [%s], want %s aa=%v [%s]",
				p.label, p.name, p.qtype, rc, r.Authoritative, strings.Join(g, " ; "), p.rcode, aa, strings.Join(want, " ; ")))
		}
	}
	note := ""
	if len(unfollowed) > 0 {
		note = " (CNAME not followed: " + strings.Join(unfollowed, ", ") + ")"
	}
	if len(bad) == 0 {
		fmt.Printf("ok %d/%d%s\n", len(ps), len(ps), note)
		return nil
	}
	fmt.Printf("WRONG %d/%d%s\n", len(bad), len(ps), note)
	for _, b := range bad {
		fmt.Println("  " + b)
	}
	os.Exit(1)
	return nil
}

// cnamesOf is the CNAME records of a sorted want list, joined as got joins.
func cnamesOf(want []string) string {
	var c []string
	for _, w := range want {
		if f := strings.Fields(w); len(f) > 1 && f[1] == "cname" {
			c = append(c, w)
		}
	}
	return strings.Join(c, " ; ")
}

// ---- watch ------------------------------------------------------------------

// session reads the processes of session sid: RSS summed (KiB), CPU
// seconds summed, and how many there are.
func session(sid int, pagesKiB int64, hz float64) (rss int64, cpu float64, n int) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, 0
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(st), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 13 || f[3] != strconv.Itoa(sid) || f[0] == "Z" {
			continue
		}
		sm, err := os.ReadFile("/proc/" + e.Name() + "/statm")
		if err != nil {
			continue
		}
		mf := strings.Fields(string(sm))
		if len(mf) < 2 {
			continue
		}
		pages, _ := strconv.ParseInt(mf[1], 10, 64)
		ut, _ := strconv.ParseFloat(f[11], 64)
		stt, _ := strconv.ParseFloat(f[12], 64)
		rss += pages * pagesKiB
		cpu += (ut + stt) / hz
		n++
	}
	return rss, cpu, n
}

type sample struct {
	t   float64
	kib int64
}

func watch(args []string) error {
	fs := flag.NewFlagSet("watch", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:53", "server host:port")
	name := fs.String("name", "", "name to ask")
	qtype := fs.String("type", "A", "query type")
	want := fs.String("want", "", "expected RDATA of -type in the answer, space separated")
	since := fs.Int64("since", 0, "start, Unix nanoseconds (0: now)")
	sid := fs.Int("sid", 0, "session id of the server's processes")
	interval := fs.Duration("interval", 20*time.Millisecond, "query interval")
	sampleEvery := fs.Duration("sample", 50*time.Millisecond, "RSS sample interval")
	timeout := fs.Duration("timeout", 600*time.Second, "give up after")
	after := fs.Duration("after", 5*time.Second, "keep sampling this long after the answer")
	steady := fs.Int64("steady", 0, "steady RSS in KiB (for back_s)")
	samplesPath := fs.String("samples", "", "file for the samples")
	fs.Parse(args)
	if *name == "" || *sid == 0 {
		return errors.New("watch: -name and -sid are needed")
	}
	wantSet := strings.Fields(*want)
	sort.Strings(wantSet)
	wantStr := strings.Join(wantSet, " ")
	qt := dns.StringToType[*qtype]
	start := time.Now()
	if *since != 0 {
		start = time.Unix(0, *since)
	}
	el := func() float64 { return time.Since(start).Seconds() }
	const hz = 100 // USER_HZ on Linux
	pagesKiB := int64(os.Getpagesize() / 1024)

	ctx, cancel := context.WithTimeout(context.Background(), *timeout-time.Since(start))
	defer cancel()

	cmdS, cmdRC := -1.0, -1
	cmdDone := make(chan struct{})
	if rest := fs.Args(); len(rest) > 0 {
		cmd := exec.Command(rest[0], rest[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			err := cmd.Wait()
			cmdS = el()
			cmdRC = 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				cmdRC = ee.ExitCode()
			} else if err != nil {
				cmdRC = 255
			}
			close(cmdDone)
		}()
	} else {
		close(cmdDone)
	}

	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	gone := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(*sampleEvery)
		defer t.Stop()
		empty := 0
		for {
			rss, _, n := session(*sid, pagesKiB, hz)
			if n == 0 {
				if empty++; empty == 5 { // 5 samples in a row: the server is gone
					close(gone)
					return
				}
			} else {
				empty = 0
				mu.Lock()
				samples = append(samples, sample{el(), rss})
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	answerS, cpuS := -1.0, -1.0
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	var failure error
poll:
	for {
		if r, err := ask(*server, dns.Fqdn(*name), qt, 200*time.Millisecond); err == nil && r.Rcode == dns.RcodeSuccess {
			var got []string
			for _, rr := range r.Answer {
				if rr.Header().Rrtype == qt {
					got = append(got, strings.TrimPrefix(rr.String(), rr.Header().String()))
				}
			}
			sort.Strings(got)
			if strings.Join(got, " ") == wantStr {
				answerS = el()
				_, cpuS, _ = session(*sid, pagesKiB, hz)
				break poll
			}
		}
		select {
		case <-ctx.Done():
			failure = fmt.Errorf("no answer %q for %s %s within %s", wantStr, *name, *qtype, *timeout)
			break poll
		case <-gone:
			failure = errors.New("the server's processes are gone")
			break poll
		case <-tick.C:
		}
	}
	if failure == nil {
		select {
		case <-cmdDone:
		case <-ctx.Done():
		}
		end := max(answerS, cmdS) + after.Seconds()
		for el() < end {
			select {
			case <-gone:
				failure = errors.New("the server's processes are gone")
				end = 0
			case <-ctx.Done():
				end = 0
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	close(stop)
	<-sampled

	mu.Lock()
	defer mu.Unlock()
	if *samplesPath != "" {
		var b strings.Builder
		for _, s := range samples {
			fmt.Fprintf(&b, "%.3f\t%d\n", s.t, s.kib)
		}
		if err := os.WriteFile(*samplesPath, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	var peak sample
	for _, s := range samples {
		if s.kib > peak.kib {
			peak = s
		}
	}
	var endKiB int64
	if len(samples) > 0 {
		endKiB = samples[len(samples)-1].kib
	}
	back := "na"
	if *steady > 0 && len(samples) > 0 {
		lo, hi := float64(*steady)*0.9, float64(*steady)*1.1
		lastOut := -1
		for i, s := range samples {
			if float64(s.kib) < lo || float64(s.kib) > hi {
				lastOut = i
			}
		}
		switch {
		case lastOut < 0:
			back = "0"
		case lastOut == len(samples)-1:
			back = "-1"
		default:
			back = fmt.Sprintf("%.3f", samples[lastOut+1].t)
		}
	}
	select {
	case <-cmdDone:
	default: // still running (a failure): not timed
		cmdS, cmdRC = -1, -1
	}
	fmt.Printf("answer_s=%.3f cmd_s=%.3f cmd_rc=%d cpu_s=%.2f peak_kib=%d peak_s=%.3f end_kib=%d back_s=%s samples=%d\n",
		answerS, cmdS, cmdRC, cpuS, peak.kib, peak.t, endKiB, back, len(samples))
	return failure
}
