package zone_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/zone"
)

// preText is the zone the pre-signed tests have BIND sign: every case
// of RFC 4035 §3.1.3 and RFC 5155 §7.2 has a name here (a wildcard, an
// empty non-terminal, a CNAME, a DNAME, a signed and an unsigned
// delegation with glue).
const preText = `$ORIGIN pre.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
@ IN MX 10 mail
ns1 IN A 127.0.0.1
mail IN A 192.0.2.2
www IN A 192.0.2.3
www IN AAAA 2001:db8::3
alias IN CNAME www
*.wild IN A 192.0.2.99
*.wild IN TXT "wild"
deep.a.ent IN TXT "deep"
srv._tcp IN SRV 0 5 443 www
sub IN NS ns.sub
sub IN DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns.sub IN A 192.0.2.53
insecure IN NS ns.insecure
ns.insecure IN A 192.0.2.54
dn IN DNAME www.pre.test.
`

// signBIND signs text (origin pre.test.) with a fresh KSK and ZSK by
// BIND's dnssec-signzone with args (-3 SALT for NSEC3, -A for opt-out),
// and returns the signed zone one record per line and the KSK's DNSKEY.
func signBIND(t testing.TB, text string, args ...string) (string, *dns.DNSKEY) {
	t.Helper()
	dnstest.NeedTool(t, "dnssec-signzone")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "z"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ksk := run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", dir, "pre.test")
	run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-K", dir, "pre.test")
	run("dnssec-signzone", append(append([]string{"-q", "-S", "-K", dir, "-o", "pre.test", "-O", "full", "-f", "signed"}, args...), "z")...)
	signed, err := os.ReadFile(filepath.Join(dir, "signed"))
	if err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, ksk+".key"))
	if err != nil {
		t.Fatal(err)
	}
	var key *dns.DNSKEY
	for _, line := range strings.Split(string(kb), "\n") {
		if rr, err := dns.NewRR(line); err == nil && rr != nil {
			key = rr.(*dns.DNSKEY)
		}
	}
	return string(signed), key
}

func presignedLookup(set *zone.Set, name string, qtype uint16, do bool) zone.Answer {
	var a zone.Answer
	set.LookupWith(&a, name, qtype, nil, &zone.LookupOptions{DO: do})
	return a
}

// TestPresignedAnswers loads zones BIND signed (NSEC, and NSEC3 with
// opt-out) and checks what answers carry: with DO, each RRset with its
// RRSIGs from the file and denials from the zone's own chain; without
// DO, no DNSSEC record but those asked for by type.
func TestPresignedAnswers(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name  string
		args  []string
		proof uint16
	}{{"nsec", nil, dns.TypeNSEC}, {"nsec3", []string{"-3", "abcd", "-H", "3", "-A"}, dns.TypeNSEC3}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			text, _ := signBIND(t, preText, v.args...)
			z, warns := mustParse(t, "pre.test.", text)
			if !z.Presigned() || !z.Signed() || z.Signer() != nil {
				t.Fatalf("presigned %v, signed %v", z.Presigned(), z.Signed())
			}
			if len(warns) > 0 {
				t.Errorf("warnings: %v", warns)
			}
			t.Log(z.PresignedSummary())
			set := zone.NewSet([]*zone.Zone{z})
			set.Precompile()
			for _, q := range []struct {
				name        string
				qtype       uint16
				rcode       int
				answer, sig int // records in the answer with DO, RRSIGs among them
				proof       bool
			}{
				{"www.pre.test.", dns.TypeA, dns.RcodeSuccess, 2, 1, false},
				{"alias.pre.test.", dns.TypeA, dns.RcodeSuccess, 4, 2, false},
				{"x.wild.pre.test.", dns.TypeA, dns.RcodeSuccess, 2, 1, true},
				{"x.wild.pre.test.", dns.TypeMX, dns.RcodeSuccess, 0, 0, true},
				{"nope.pre.test.", dns.TypeA, dns.RcodeNameError, 0, 0, true},
				{"www.pre.test.", dns.TypeMX, dns.RcodeSuccess, 0, 0, true},
				{"a.ent.pre.test.", dns.TypeA, dns.RcodeSuccess, 0, 0, true},
				{"insecure.pre.test.", dns.TypeDS, dns.RcodeSuccess, 0, 0, true},
				{"pre.test.", dns.TypeDNSKEY, dns.RcodeSuccess, 4, 2, false},
			} {
				a := presignedLookup(set, q.name, q.qtype, true)
				if a.Rcode != q.rcode || len(a.Answer) != q.answer || countType(a.Answer, dns.TypeRRSIG) != q.sig || (countType(a.Ns, v.proof) > 0) != q.proof {
					t.Errorf("%s %s DO: rcode %d, answer %d (%d RRSIGs), %d proofs; want %d, %d (%d), proof %v\n%v\n%v",
						q.name, dns.TypeToString[q.qtype], a.Rcode, len(a.Answer), countType(a.Answer, dns.TypeRRSIG), countType(a.Ns, v.proof),
						q.rcode, q.answer, q.sig, q.proof, a.Answer, a.Ns)
				}
				plain := presignedLookup(set, q.name, q.qtype, false)
				for _, rr := range append(append(plain.Answer, plain.Ns...), plain.Extra...) {
					switch rr.Header().Rrtype {
					case dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3:
						t.Errorf("%s %s without DO carries %s", q.name, dns.TypeToString[q.qtype], rr)
					}
				}
			}
			// The wildcard's RRSIG keeps its label count under the name
			// it answers (RFC 4035 §5.3.4).
			a := presignedLookup(set, "x.wild.pre.test.", dns.TypeA, true)
			for _, rr := range a.Answer {
				if sig, ok := rr.(*dns.RRSIG); ok && (sig.Labels != 3 || sig.Hdr.Name != "x.wild.pre.test.") {
					t.Errorf("wildcard RRSIG %s", sig)
				}
			}
			// A referral to the unsigned child proves there is no DS.
			a = presignedLookup(set, "www.insecure.pre.test.", dns.TypeA, true)
			if !a.Referral || countType(a.Ns, v.proof) == 0 {
				t.Errorf("insecure referral: %v", a.Ns)
			}
			a = presignedLookup(set, "www.sub.pre.test.", dns.TypeA, true)
			if !a.Referral || countType(a.Ns, dns.TypeDS) != 1 || countType(a.Ns, dns.TypeRRSIG) != 1 {
				t.Errorf("secure referral: %v", a.Ns)
			}
			// Asked by type, without DO.
			if a := presignedLookup(set, "www.pre.test.", dns.TypeRRSIG, false); countType(a.Answer, dns.TypeRRSIG) < 2 {
				t.Errorf("RRSIG www without DO: %v", a.Answer)
			}
			// Transfers and the last good copy keep every record.
			n := 0
			for range z.EachRecord {
				n++
			}
			if n != z.Records {
				t.Errorf("EachRecord yields %d records, the zone has %d", n, z.Records)
			}
			back, _ := mustParse(t, "pre.test.", string(z.Source()))
			if !back.Presigned() || back.Records != z.Records {
				t.Errorf("Source parses back into %d records (presigned %v), want %d", back.Records, back.Presigned(), z.Records)
			}
		})
	}
}

// TestPresignedNoAlloc: a denial from the zone's chain (NXDOMAIN, three
// NSEC3 hashes; NODATA, one) costs no allocation beyond what the same
// lookup without DO makes.
func TestPresignedNoAlloc(t *testing.T) {
	text, _ := signBIND(t, preText, "-3", "abcd", "-H", "3")
	z, _ := mustParse(t, "pre.test.", text)
	set := zone.NewSet([]*zone.Zone{z})
	set.Precompile()
	do, plain := &zone.LookupOptions{DO: true}, &zone.LookupOptions{}
	var a zone.Answer
	set.LookupWith(&a, "nope.x.pre.test.", dns.TypeA, nil, do)
	if n := countType(a.Ns, dns.TypeNSEC3); n < 2 {
		t.Fatalf("NXDOMAIN proof: %v", a.Ns)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"nope.x.pre.test.", dns.TypeA}, {"www.pre.test.", dns.TypeMX}, {"a.ent.pre.test.", dns.TypeTXT}} {
		with := testing.AllocsPerRun(100, func() { set.LookupWith(&a, q.name, q.qtype, nil, do) })
		without := testing.AllocsPerRun(100, func() { set.LookupWith(&a, q.name, q.qtype, nil, plain) })
		if with != without {
			t.Errorf("%s %s: %.1f allocations with DO, %.1f without", q.name, dns.TypeToString[q.qtype], with, without)
		}
	}
}

// TestPresignedBadInput: a pre-signed zone that would not validate fails
// to load, each problem at its file:line.
func TestPresignedBadInput(t *testing.T) {
	t.Parallel()
	nsec, _ := signBIND(t, preText)
	nsec3, _ := signBIND(t, preText, "-3", "abcd", "-H", "3")
	lines := func(text string) []string { return strings.Split(strings.TrimSpace(text), "\n") }
	without := func(text string, drop func(string) bool) string {
		var out []string
		for _, l := range lines(text) {
			if !drop(l) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n") + "\n"
	}
	fields := func(l string) []string { return strings.Fields(l) }
	first := true
	nsec3Line := ""
	for _, l := range lines(nsec3) {
		if f := fields(l); len(f) > 4 && f[3] == "NSEC3" && first {
			first = false
			nsec3Line = l
		}
	}
	for _, c := range []struct {
		name, text, want string
		now              time.Time
	}{
		{"nsec gap", without(nsec, func(l string) bool {
			f := fields(l)
			return len(f) > 3 && f[0] == "mail.pre.test." && (f[3] == "NSEC" || f[3] == "RRSIG" && f[4] == "NSEC")
		}), "no NSEC", time.Time{}},
		{"nsec next points nowhere", strings.Replace(nsec, "NSEC\twww.pre.test.", "NSEC\twwx.pre.test.", 1), "NSEC chain does not close", time.Time{}},
		{"nsec3 gap", without(nsec3, func(l string) bool { return l == nsec3Line }), "NSEC3", time.Time{}},
		{"nsec3 mixed parameters", strings.Replace(nsec3, nsec3Line, strings.Replace(nsec3Line, " 3 ABCD ", " 4 ABCD ", 1), 1), "parameters", time.Time{}},
		{"expired", nsec, "expired", time.Now().Add(400 * 24 * time.Hour)},
		{"unknown key", without(nsec, func(l string) bool {
			f := fields(l)
			return len(f) > 4 && f[3] == "DNSKEY" && f[4] == "256"
		}), "DNSKEY RRset does not hold", time.Time{}},
		{"unsigned RRset", nsec + "www.pre.test. 300 IN TXT \"new\"\n", "has no RRSIG", time.Time{}},
	} {
		z, errs, _ := zone.ParseWith(nil, "pre.test.", "signed.zone", []byte(c.text), zone.ParseOptions{Now: c.now})
		if z != nil || len(errs) == 0 {
			t.Errorf("%s: loaded", c.name)
			continue
		}
		if !strings.Contains(errs.Error(), c.want) || errs[0].File != "signed.zone" {
			t.Errorf("%s: errors %v, want %q at signed.zone:line", c.name, errs, c.want)
		}
		t.Logf("%s: %v", c.name, errs[0])
	}
	// Signatures that expire before the next refresh: a warning.
	_, errs, warns := zone.ParseWith(nil, "pre.test.", "signed.zone", []byte(nsec), zone.ParseOptions{Now: time.Now().Add(29*24*time.Hour + 22*time.Hour)})
	if len(errs) > 0 || !strings.Contains(warns.Error(), "before the next refresh") {
		t.Errorf("expiring soon: errors %v, warnings %v", errs, warns)
	}
}
