package zone

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// TestPrecompileManyAsSerial: many zones precompiled on several
// goroutines (precompileMany, in phases) get the very answers they get
// one after another (precompileSerial): every template, with and without
// DO, every plain flag, every lookup and negative SOA, of zones whose
// records name other zones of the set (MX, NS, SRV and CNAME targets
// there, a delegation to a child zone hosted beside its parent, a
// parent's names that a child zone hosted beside it answers), with
// wildcards and steered names, beside a large zone, a signed one, a zone
// parsed with the served one, one WithSerial made and one that failed. Under the race detector it also checks that no
// phase writes what another goroutine's lookups read.
func TestPrecompileManyAsSerial(t *testing.T) {
	const n = 2 * precompileRun
	small := func(i int) string {
		o := fmt.Sprintf("c%d.test.", i)
		s := fmt.Sprintf(`$ORIGIN %s
$TTL 3600
@ IN SOA ns1.hosting.test. hostmaster %d 7200 3600 1209600 300
@ 86400 IN NS ns1.hosting.test.
@ 86400 IN NS ns2.hosting.test.
@ IN MX 10 mail
@ IN MX 20 mail.c%d.test.
@ IN TXT "v=spf1 mx -all"
@ IN A 10.0.%d.%d
www IN A 10.1.%d.%d
www IN AAAA 2001:db8::%x
mail IN A 10.2.%d.%d
ftp IN CNAME www
away IN CNAME www.c%d.test.
_sip._tcp IN SRV 0 5 5060 www.c%d.test.
*.wild IN A 10.9.%d.%d
wild IN MX 5 x.wild
big IN MX 5 host7.big.test.
`, o, i, (i+1)%n, i>>8, i&255, i>>8, i&255, i, i>>8, i&255, (i+7)%n, (i+3)%n, i>>8, i&255)
		if i%10 == 0 { // a child zone hosted here too
			s += fmt.Sprintf("sub IN NS ns.sub\nns.sub IN A 192.0.2.%d\nsub IN NS ns1.hosting.test.\n", i%250)
		}
		// Names under a child zone hosted here, not delegated.
		s += "nodeleg IN MX 10 mail\nwww.nodeleg IN A 10.5.0.1\n"
		return s
	}
	undelegated := func(i int) string {
		return fmt.Sprintf(`$ORIGIN nodeleg.c%d.test.
@ IN SOA ns1.hosting.test. hostmaster 1 7200 3600 1209600 300
@ IN NS ns1.hosting.test.
@ IN MX 20 mx
mx IN A 192.0.2.%d
`, i, i%250)
	}
	child := func(i int) string {
		return fmt.Sprintf(`$ORIGIN sub.c%d.test.
@ IN SOA ns.sub.c%d.test. hostmaster 1 7200 3600 1209600 300
@ IN NS ns
@ IN NS ns1.hosting.test.
ns IN A 192.0.2.%d
@ IN MX 1 mail.c%d.test.
x IN A 192.0.2.99
`, i, i, i%250, i)
	}
	hosting := `$ORIGIN hosting.test.
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
@ IN NS ns2
ns1 IN A 198.51.100.1
ns1 IN AAAA 2001:db8:53::1
ns2 IN A 198.51.100.2
`
	var bigText bytes.Buffer
	bigText.WriteString("$ORIGIN big.test.\n@ IN SOA ns1.hosting.test. hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1.hosting.test.\n")
	for i := range 300 {
		fmt.Fprintf(&bigText, "host%d IN A 10.8.%d.%d\nhost%d IN MX 10 mail.c%d.test.\n", i, i>>8, i&255, i, i%n)
	}
	signText := `$ORIGIN signed.test.
@ IN SOA ns1.hosting.test. hostmaster 1 7200 3600 1209600 300
@ IN NS ns1.hosting.test.
@ IN MX 10 mail.c1.test.
www IN A 192.0.2.80
alias IN CNAME www.c2.test.
`
	key, err := dnssec.GenerateKey("signed.test.", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := dnssec.NewSigner("signed.test.", []*dnssec.Key{key}, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	parse := func(origin, text string, o ParseOptions) *Zone {
		t.Helper()
		z, errs, _ := ParseWith(nil, origin, origin+"zone", []byte(text), o)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return z
	}
	// Served zones, precompiled once and shared (read only) by both sets:
	// the previous load of a zone parsed again, and the base of a zone
	// WithSerial makes.
	prevText := "$ORIGIN prev.test.\n@ IN SOA ns1.hosting.test. hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1.hosting.test.\n@ IN MX 10 mail.c4.test.\nwww IN A 192.0.2.1\nold IN A 192.0.2.2\n"
	prev := parse("prev.test.", prevText, ParseOptions{})
	base := parse("base.test.", "$ORIGIN base.test.\n@ IN SOA ns1.hosting.test. hostmaster 1 7200 3600 1209600 300\n@ IN NS ns1.hosting.test.\n@ IN MX 10 mail.c5.test.\nwww IN A 192.0.2.3\n", ParseOptions{})
	NewSet([]*Zone{prev, base}).precompileSerial()

	build := func() []*Zone {
		// A run of parents, then the run of the zones their names
		// under nodeleg look up in: two goroutines take the two at once.
		var zones, subs []*Zone
		for r := 0; r < n; r += precompileRun {
			for i := r; i < r+precompileRun; i++ {
				z := parse(fmt.Sprintf("c%d.test.", i), small(i), ParseOptions{})
				if err := z.MarkSteered("steer."+z.Origin, dns.TypeA); err != nil {
					t.Fatal(err)
				}
				zones = append(zones, z)
				if i%10 == 0 {
					subs = append(subs, parse(fmt.Sprintf("sub.c%d.test.", i), child(i), ParseOptions{}))
				}
			}
			for i := r; i < r+precompileRun; i++ {
				zones = append(zones, parse(fmt.Sprintf("nodeleg.c%d.test.", i), undelegated(i), ParseOptions{}))
			}
		}
		zones = append(zones, subs...)
		sz := parse("signed.test.", signText, ParseOptions{})
		if err := sz.Sign(signer, now, 1); err != nil {
			t.Fatal(err)
		}
		nz, probs := base.WithSerial(7)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		zones = append(zones,
			parse("hosting.test.", hosting, ParseOptions{}),
			parse("big.test.", bigText.String(), ParseOptions{Workers: 2}),
			sz, nz,
			parse("prev.test.", prevText+"new IN MX 10 mail.c6.test.\n", ParseOptions{Previous: prev}),
			NewFailed("failed.test.", "failed.test.zone", "test"))
		return zones
	}
	serialZones, manyZones := build(), build()
	serial, many := NewSet(serialZones), NewSet(manyZones)
	// A set of few zones is precompiled one after another, as before.
	if w := serial.manyWorkers(8); w != 1 {
		t.Errorf("%d zones are precompiled on %d goroutines, want 1", len(serialZones), w)
	}
	if w := NewSet(serialZones[:1]).manyWorkers(8); w != 1 {
		t.Errorf("one zone is precompiled on %d goroutines, want 1", w)
	}
	t0 := time.Now()
	serial.precompileSerial()
	t1 := time.Now()
	many.precompileMany(4)
	t.Logf("%d zones: serial %v, on 4 goroutines %v", len(serialZones), t1.Sub(t0), time.Since(t1))

	qtypes := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeMX, dns.TypeTXT, dns.TypeSOA, dns.TypeSRV, dns.TypeCNAME, dns.TypeDS, dns.TypeANY}
	answers := 0
	for k, a := range serialZones {
		b := manyZones[k]
		if a.Failed != "" {
			continue
		}
		if a.Negative() == nil || *a.Negative() != *b.Negative() {
			t.Errorf("%s: negative SOA %+v, one after another %+v", a.Origin, *b.Negative(), *a.Negative())
		}
		for name, na := range a.nodes.all {
			nb := b.nodes.get(name)
			if nb == nil {
				t.Fatalf("%s: no node in the zone precompiled on several goroutines", name)
			}
			if na.plain != nb.plain || na.ntpl != nb.ntpl {
				t.Errorf("%s: plain %v with %d templates, one after another %v with %d", name, nb.plain, nb.ntpl, na.plain, na.ntpl)
			}
			for _, ta := range na.templates() {
				if wb := nb.Template(ta.qtype); !bytes.Equal(ta.bytes(), wb) {
					t.Errorf("%s %s: template\n%x\none after another\n%x", name, dns.TypeToString[ta.qtype], wb, ta.bytes())
				}
				// Signatures differ from one signing to the next (ECDSA),
				// their lengths do not.
				if da, db := na.TemplateDO(ta.qtype), nb.TemplateDO(ta.qtype); len(da) != len(db) || a.signer == nil && !bytes.Equal(da, db) {
					t.Errorf("%s %s: DO template of %d bytes, one after another %d", name, dns.TypeToString[ta.qtype], len(db), len(da))
				}
				answers++
			}
			if k%4 != 0 && a.nodes.len() <= smallZoneNodes {
				continue // the lookups of every fourth small zone suffice
			}
			for _, q := range qtypes {
				ga, gb := serial.Lookup(name, q), many.Lookup(name, q)
				if sa, sb := fmt.Sprint(ga.Rcode, ga.Answer, ga.Ns, ga.Extra), fmt.Sprint(gb.Rcode, gb.Answer, gb.Ns, gb.Extra); sa != sb && a.signer == nil {
					t.Errorf("%s %s: %s\none after another\n%s", name, dns.TypeToString[q], sb, sa)
				}
			}
		}
	}
	// Answers with additional data are among those compared, and one
	// that another zone makes.
	for _, c := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"c3.test.", dns.TypeMX, "10.2.0.3"},        // mail.c3.test.'s address
		{"sub.c20.test.", dns.TypeNS, "192.0.2.20"}, // the child's ns.sub.c20.test.
		// A name of c25.test. that the child zone answers, packed
		// with a lookup in that zone: its MX and that MX's address.
		{"nodeleg.c25.test.", dns.TypeMX, "192.0.2.25"},
	} {
		_, _, nd := many.Classify(c.name)
		if nd == nil || !bytes.Contains(nd.Template(c.qtype), net.ParseIP(c.want).To4()) {
			t.Errorf("%s %s: template %x does not hold %s", c.name, dns.TypeToString[c.qtype], nd.Template(c.qtype), c.want)
		}
	}
	// The parents are prepared, packed and finished at once; the zones
	// below them wait for every packing.
	if many.hostsAbove("c3.test.") || !many.hostsAbove("nodeleg.c3.test.") || !many.hostsAbove("sub.c20.test.") {
		t.Errorf("zones above: c3.test. %v, nodeleg.c3.test. %v, sub.c20.test. %v",
			many.hostsAbove("c3.test."), many.hostsAbove("nodeleg.c3.test."), many.hostsAbove("sub.c20.test."))
	}
	if answers < 10*n {
		t.Errorf("%d templates compared, want at least %d", answers, 10*n)
	}
}

// BenchmarkPrecompileManyZones precompiles 20,000 zones of ten records
// (bench/zonegen many's) one after another (workers=0), in phases on one
// goroutine (workers=1, the phases' own cost) and on every core, the
// parse left out of the time: compare them within one run, on a loaded
// machine wall time says little of a second core.
func BenchmarkPrecompileManyZones(b *testing.B) {
	const zones = 20000
	text := func(i int) []byte {
		return fmt.Appendf(nil, `$ORIGIN cust%06d.com.
$TTL 3600
@ 3600 IN SOA ns1.hosting.test. hostmaster.hosting.test. 2026120101 7200 3600 1209600 300
@ 86400 IN NS ns1.hosting.test.
@ 86400 IN NS ns2.hosting.test.
@ IN MX 10 mail
@ IN TXT "v=spf1 mx -all"
@ IN A 10.0.%d.%d
www IN A 10.1.%d.%d
www IN AAAA 2001:db8::%x
mail IN A 10.2.%d.%d
ftp IN CNAME www
`, i, i>>8&255, i&255, i>>8&255, i&255, i, i>>8&255, i&255)
	}
	for _, workers := range []int{0, 1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var cpu time.Duration // the process's, the collector's included
			for b.Loop() {
				b.StopTimer()
				list := make([]*Zone, zones)
				for i := range list {
					origin := fmt.Sprintf("cust%06d.com.", i)
					z, errs, _ := Parse(nil, origin, origin+"zone", text(i))
					if len(errs) > 0 {
						b.Fatal(errs)
					}
					list[i] = z
				}
				set := NewSet(list)
				runtime.GC()
				c0 := cpuTime()
				b.StartTimer()
				if workers == 0 {
					set.precompileSerial()
				} else {
					set.precompileMany(workers)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*zones), "ns/zone")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*zones), "cpu-ns/zone")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
