package zone_test

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/zone"
)

const signText = `$ORIGIN sign.test.
$TTL 3600
@ 600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
@ IN MX 10 mail
ns1 IN A 192.0.2.1
mail IN A 192.0.2.2
www IN A 192.0.2.3
www IN AAAA 2001:db8::3
txt IN TXT "hello"
alias IN CNAME www
*.wild IN A 192.0.2.4
sub IN NS ns.sub
sub IN DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub IN A 192.0.2.5
insecure IN NS ns.insecure
ns.insecure IN A 192.0.2.6
dn IN DNAME other.sign.test.
www.other IN A 192.0.2.7
deep.ent.x IN TXT "below an empty non-terminal"
`

// memKey makes a key pair for zone in memory with dnssec.GenerateKey.
func memKey(t testing.TB, zone string, alg uint8, sep bool) *dnssec.Key {
	t.Helper()
	k, err := dnssec.GenerateKey(zone, alg, sep)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSigner(t testing.TB, origin string, o dnssec.Options, keys ...*dnssec.Key) *dnssec.Signer {
	t.Helper()
	if len(keys) == 0 {
		keys = []*dnssec.Key{memKey(t, origin, dns.ECDSAP256SHA256, true)}
	}
	s, err := dnssec.NewSigner(origin, keys, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signedSet parses text as origin, signs it with s at now and
// precompiles it.
func signedSet(t testing.TB, origin, text string, s *dnssec.Signer, now time.Time, prev *zone.Zone) (*zone.Set, *zone.Zone) {
	t.Helper()
	z, errs, _ := zone.ParseWith(nil, origin, origin+"zone", []byte(text), zone.ParseOptions{Previous: prev})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.Sign(s, now, 2); err != nil {
		t.Fatal(err)
	}
	set := zone.NewSet([]*zone.Zone{z})
	set.Precompile()
	return set, z
}

// verifySection checks that every RRset of rrs but those skip names
// has RRSIGs from the keys of s that verify at now, and returns how
// many RRsets were signed.
func verifySection(t *testing.T, what string, rrs []dns.RR, s *dnssec.Signer, now time.Time, unsigned func(dns.RR) bool) int {
	t.Helper()
	type key struct {
		name string
		t    uint16
	}
	sets := map[key][]dns.RR{}
	sigs := map[key][]*dns.RRSIG{}
	var order []key
	for _, rr := range rrs {
		h := rr.Header()
		if sig, ok := rr.(*dns.RRSIG); ok {
			k := key{strings.ToLower(h.Name), sig.TypeCovered}
			sigs[k] = append(sigs[k], sig)
			if sig.Hdr.Ttl != sig.OrigTtl && k.t != dns.TypeSOA {
				t.Errorf("%s: RRSIG TTL %d, original TTL %d", what, sig.Hdr.Ttl, sig.OrigTtl)
			}
			continue
		}
		k := key{strings.ToLower(h.Name), h.Rrtype}
		if sets[k] == nil {
			order = append(order, k)
		}
		sets[k] = append(sets[k], rr)
	}
	signed := 0
	for _, k := range order {
		if unsigned != nil && unsigned(sets[k][0]) {
			if len(sigs[k]) > 0 {
				t.Errorf("%s: %s %s has RRSIGs, want none", what, k.name, dns.TypeToString[k.t])
			}
			continue
		}
		if len(sigs[k]) == 0 {
			t.Errorf("%s: %s %s has no RRSIG", what, k.name, dns.TypeToString[k.t])
			continue
		}
		for _, sig := range sigs[k] {
			var dk *dns.DNSKEY
			for _, key := range s.Keys() {
				if key.Tag == sig.KeyTag {
					dk = key.DNSKEY
				}
			}
			if dk == nil {
				t.Errorf("%s: RRSIG by unknown key %d", what, sig.KeyTag)
				continue
			}
			if err := sig.Verify(dk, sets[k]); err != nil {
				t.Errorf("%s: %s %s: %v", what, k.name, dns.TypeToString[k.t], err)
			}
			if !sig.ValidityPeriod(now) {
				t.Errorf("%s: %s %s: signature not valid now", what, k.name, dns.TypeToString[k.t])
			}
			if sig.Hdr.Ttl != sets[k][0].Header().Ttl {
				t.Errorf("%s: %s %s: RRSIG TTL %d, RRset's %d", what, k.name, dns.TypeToString[k.t], sig.Hdr.Ttl, sets[k][0].Header().Ttl)
			}
		}
		signed++
	}
	return signed
}

func do() *zone.LookupOptions { return &zone.LookupOptions{DO: true} }

func TestSignedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys func(t *testing.T) []*dnssec.Key
	}{
		{"csk-p256", func(t *testing.T) []*dnssec.Key {
			return []*dnssec.Key{memKey(t, "sign.test.", dns.ECDSAP256SHA256, true)}
		}},
		{"ksk-zsk-ed25519", func(t *testing.T) []*dnssec.Key {
			return []*dnssec.Key{memKey(t, "sign.test.", dns.ED25519, true), memKey(t, "sign.test.", dns.ED25519, false)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			s := newSigner(t, "sign.test.", dnssec.Options{}, tc.keys(t)...)
			set, z := signedSet(t, "sign.test.", signText, s, now, nil)
			if !z.Signed() {
				t.Fatal("zone not signed")
			}
			var a zone.Answer
			// Every authoritative RRset with DO: the answer verifies, and
			// the additional section's addresses too.
			for _, q := range []struct {
				name string
				t    uint16
			}{
				{"sign.test.", dns.TypeSOA}, {"sign.test.", dns.TypeNS}, {"sign.test.", dns.TypeMX},
				{"sign.test.", dns.TypeDNSKEY}, {"sign.test.", dns.TypeCDS}, {"sign.test.", dns.TypeCDNSKEY},
				{"ns1.sign.test.", dns.TypeA}, {"WWW.sign.test.", dns.TypeA}, {"www.sign.test.", dns.TypeAAAA},
				{"txt.sign.test.", dns.TypeTXT}, {"deep.ent.x.sign.test.", dns.TypeTXT},
			} {
				set.LookupWith(&a, q.name, q.t, nil, do())
				what := q.name + " " + dns.TypeToString[q.t]
				if a.Rcode != dns.RcodeSuccess || len(a.Answer) == 0 {
					t.Fatalf("%s: rcode %d answer %v", what, a.Rcode, a.Answer)
				}
				if n := verifySection(t, what, a.Answer, s, now, nil); n != 1 {
					t.Errorf("%s: %d RRsets signed in the answer, want 1", what, n)
				}
				verifySection(t, what+" additional", a.Extra, s, now, nil)
				if q.t == dns.TypeDNSKEY {
					want := len(s.Keys())
					if got := len(a.Answer) - countType(a.Answer, dns.TypeRRSIG); got != want {
						t.Errorf("DNSKEY RRset has %d keys, want %d", got, want)
					}
					// Signed by the SEP keys only.
					for _, rr := range a.Answer {
						if sig, ok := rr.(*dns.RRSIG); ok && sig.KeyTag != s.Keys()[0].Tag {
							t.Errorf("DNSKEY signed by key %d, not the KSK", sig.KeyTag)
						}
					}
				}
				if q.t == dns.TypeSOA && a.Answer[0].Header().Ttl != 600 {
					t.Errorf("SOA TTL %d", a.Answer[0].Header().Ttl)
				}
				if q.t == dns.TypeDNSKEY && a.Answer[0].Header().Ttl != 600 {
					t.Errorf("DNSKEY TTL %d, want the SOA's 600", a.Answer[0].Header().Ttl)
				}
				// Without DO: the answer of the same zone unsigned.
				set.LookupWith(&a, q.name, q.t, nil, nil)
				if countType(a.Answer, dns.TypeRRSIG)+countType(a.Extra, dns.TypeRRSIG) != 0 {
					t.Errorf("%s without DO has RRSIGs", what)
				}
			}

			// A CNAME chain: both RRsets signed.
			set.LookupWith(&a, "alias.sign.test.", dns.TypeA, nil, do())
			if n := verifySection(t, "alias", a.Answer, s, now, nil); n != 2 {
				t.Errorf("alias: %d RRsets signed, want CNAME and A: %v", n, a.Answer)
			}
			// A DNAME: the DNAME and the target signed, the synthesised
			// CNAME not.
			set.LookupWith(&a, "www.dn.sign.test.", dns.TypeA, nil, do())
			if n := verifySection(t, "dname", a.Answer, s, now, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeCNAME }); n != 2 {
				t.Errorf("dname: %d RRsets signed, want DNAME and A: %v", n, a.Answer)
			}
			// A wildcard: the RRSIG under the query name, with the
			// wildcard's label count (it verifies only so).
			set.LookupWith(&a, "a.b.wild.sign.test.", dns.TypeA, nil, do())
			if n := verifySection(t, "wildcard", a.Answer, s, now, nil); n != 1 {
				t.Errorf("wildcard: %v", a.Answer)
			}
			for _, rr := range a.Answer {
				if sig, ok := rr.(*dns.RRSIG); ok && (sig.Labels != 3 || sig.Hdr.Name != "a.b.wild.sign.test.") {
					t.Errorf("wildcard RRSIG %v: want labels 3 under the query name", sig)
				}
			}
			if a.Wildcard != "*.wild.sign.test." {
				t.Errorf("wildcard %q", a.Wildcard)
			}
			// A referral with a DS: NS unsigned, DS signed; glue unsigned.
			set.LookupWith(&a, "www.sub.sign.test.", dns.TypeA, nil, do())
			if !a.Referral || countType(a.Ns, dns.TypeDS) != 1 {
				t.Fatalf("referral: %v", a.Ns)
			}
			if n := verifySection(t, "referral", a.Ns, s, now, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeNS }); n != 1 {
				t.Errorf("referral: %d RRsets signed, want the DS", n)
			}
			if len(a.Extra) != 1 || countType(a.Extra, dns.TypeRRSIG) != 0 {
				t.Errorf("referral glue %v, want one A and no RRSIG", a.Extra)
			}
			// The DS asked at the cut: an authoritative answer, signed.
			set.LookupWith(&a, "sub.sign.test.", dns.TypeDS, nil, do())
			if n := verifySection(t, "DS", a.Answer, s, now, nil); n != 1 || !a.Authoritative {
				t.Errorf("DS: %v", a.Answer)
			}
			// Without DO, the referral is the unsigned one.
			set.LookupWith(&a, "www.sub.sign.test.", dns.TypeA, nil, nil)
			if countType(a.Ns, dns.TypeDS)+countType(a.Ns, dns.TypeRRSIG) != 0 {
				t.Errorf("referral without DO: %v", a.Ns)
			}
		})
	}
}

func countType(rrs []dns.RR, t uint16) int {
	n := 0
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			n++
		}
	}
	return n
}

// TestSignedUnsignedAnswersSame checks that a signed zone answers a
// query without DO, and an unsigned zone any query, exactly as before:
// the same records and the same precompiled templates.
func TestSignedUnsignedAnswersSame(t *testing.T) {
	now := time.Now()
	s := newSigner(t, "sign.test.", dnssec.Options{})
	signed, _ := signedSet(t, "sign.test.", signText, s, now, nil)
	plain := mustSet(t, "sign.test.", signText)
	plain.Precompile()
	var a, b zone.Answer
	for _, name := range []string{"sign.test.", "www.sign.test.", "alias.sign.test.", "a.wild.sign.test.", "x.sub.sign.test.", "nx.sign.test.", "www.dn.sign.test.", "ent.x.sign.test."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeTXT, dns.TypeDS, dns.TypeANY} {
			signed.LookupWith(&a, name, qt, nil, nil)
			plain.LookupWith(&b, name, qt, nil, do())
			if fmt.Sprint(a.Rcode, a.Answer, a.Ns, a.Extra) != fmt.Sprint(b.Rcode, b.Answer, b.Ns, b.Extra) {
				t.Errorf("%s %s: signed zone without DO\n%v %v %v\nunsigned with DO\n%v %v %v", name, dns.TypeToString[qt], a.Answer, a.Ns, a.Extra, b.Answer, b.Ns, b.Extra)
			}
			_, _, sn := signed.Classify(name)
			_, _, pn := plain.Classify(name)
			if sn != nil && pn != nil && !bytes.Equal(sn.Template(qt), pn.Template(qt)) {
				t.Errorf("%s %s: templates differ", name, dns.TypeToString[qt])
			}
			if pn != nil && pn.TemplateDO(qt) != nil {
				t.Errorf("%s %s: an unsigned zone has a DO template", name, dns.TypeToString[qt])
			}
		}
	}
}

// TestTemplateDO checks that each DO template is the general path's
// answer with DO, byte for byte.
func TestTemplateDO(t *testing.T) {
	now := time.Now()
	s := newSigner(t, "sign.test.", dnssec.Options{})
	set, _ := signedSet(t, "sign.test.", signText, s, now, nil)
	count := 0
	for _, name := range []string{"sign.test.", "ns1.sign.test.", "mail.sign.test.", "www.sign.test.", "txt.sign.test.", "deep.ent.x.sign.test."} {
		kind, _, n := set.Classify(name)
		if kind != zone.FastNode {
			t.Fatalf("%s: kind %v", name, kind)
		}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeTXT, dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY} {
			tpl := n.TemplateDO(qt)
			if (tpl == nil) != (n.Template(qt) == nil) {
				t.Errorf("%s %s: DO template %v, template %v", name, dns.TypeToString[qt], tpl != nil, n.Template(qt) != nil)
			}
			if tpl == nil {
				continue
			}
			count++
			var a zone.Answer
			set.LookupWith(&a, name, qt, nil, do())
			m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Compress: true,
				Question: []dns.Question{{Name: name, Qtype: qt, Qclass: dns.ClassINET}}, Answer: a.Answer, Ns: a.Ns, Extra: a.Extra}
			want, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			q := new(dns.Msg)
			q.SetQuestion(name, qt)
			qw, _ := q.Pack()
			got := append(append(append([]byte{}, tpl[:12]...), qw[12:]...), tpl[12:]...)
			var gm dns.Msg
			if err := gm.Unpack(got); err != nil {
				t.Fatalf("%s %s: %v", name, dns.TypeToString[qt], err)
			}
			if fmt.Sprint(gm.Answer, gm.Ns, gm.Extra) != fmt.Sprint(m.Answer, m.Ns, m.Extra) {
				t.Errorf("%s %s: DO template\n%v\nwant\n%v", name, dns.TypeToString[qt], gm.Answer, m.Answer)
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: DO template %d bytes, the general path %d", name, dns.TypeToString[qt], len(got), len(want))
			}
			verifySection(t, name, gm.Answer, s, now, nil)
		}
	}
	if count < 12 {
		t.Errorf("%d DO templates", count)
	}
}

// TestSignReloadKeepsSignatures checks that a reload re-signs what
// changed and nothing else, counted by the signer.
func TestSignReloadKeepsSignatures(t *testing.T) {
	now := time.Now()
	s := newSigner(t, "sign.test.", dnssec.Options{})
	var b strings.Builder
	b.WriteString(signText)
	for i := range 200 {
		fmt.Fprintf(&b, "h%d IN A 10.0.%d.%d\n", i, i/250, i%250)
	}
	text := b.String()
	_, z := signedSet(t, "sign.test.", text, s, now, nil)
	first := s.Made(dnssec.ReasonLoad)
	if first < 200 {
		t.Fatalf("%d signatures made at load", first)
	}
	// The same text again: nothing signed.
	set, z2 := signedSet(t, "sign.test.", text, s, now.Add(time.Hour), z)
	if got := s.Made(dnssec.ReasonLoad) - first; got != 0 {
		t.Errorf("an unchanged reload made %d signatures", got)
	}
	// One record changed and the serial with it: its RRset and the SOA.
	changed := strings.Replace(text, "h7 IN A 10.0.0.7\n", "h7 IN A 10.9.9.9\n", 1)
	changed = strings.Replace(changed, "hostmaster 1 7200", "hostmaster 2 7200", 1)
	before := s.Made(dnssec.ReasonLoad)
	set, _ = signedSet(t, "sign.test.", changed, s, now.Add(2*time.Hour), z2)
	if got := s.Made(dnssec.ReasonLoad) - before; got != 2 {
		t.Errorf("a reload changing one record made %d signatures, want 2 (its RRset, the SOA)", got)
	}
	var a zone.Answer
	for _, q := range []string{"h7.sign.test.", "h8.sign.test.", "www.sign.test."} {
		set.LookupWith(&a, q, dns.TypeA, nil, do())
		verifySection(t, q, a.Answer, s, now.Add(2*time.Hour), nil)
	}
	set.LookupWith(&a, "sign.test.", dns.TypeSOA, nil, do())
	if a.Answer[0].(*dns.SOA).Serial != 2 {
		t.Fatal(a.Answer)
	}
	verifySection(t, "SOA", a.Answer, s, now.Add(2*time.Hour), nil)
	// A new key: everything signed again.
	s2 := newSigner(t, "sign.test.", dnssec.Options{})
	set, _ = signedSet(t, "sign.test.", changed, s2, now.Add(3*time.Hour), z2)
	if got := s2.Made(dnssec.ReasonLoad); got < first {
		t.Errorf("a new key made %d signatures, want %d or more", got, first)
	}
	set.LookupWith(&a, "h8.sign.test.", dns.TypeA, nil, do())
	verifySection(t, "new key", a.Answer, s2, now.Add(3*time.Hour), nil)
	// No longer signed: no RRSIG, no DNSKEY, no DO template.
	z4, errs, _ := zone.ParseWith(nil, "sign.test.", "sign.test.zone", []byte(changed), zone.ParseOptions{Previous: z2})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	set = zone.NewSet([]*zone.Zone{z4})
	set.Precompile()
	set.LookupWith(&a, "h8.sign.test.", dns.TypeA, nil, do())
	if countType(a.Answer, dns.TypeRRSIG) != 0 {
		t.Errorf("unsigned again: %v", a.Answer)
	}
	if _, _, n := set.Classify("h8.sign.test."); n.TemplateDO(dns.TypeA) != nil {
		t.Error("unsigned again: a DO template")
	}
	if set.LookupWith(&a, "sign.test.", dns.TypeDNSKEY, nil, do()); len(a.Answer) != 0 {
		t.Errorf("unsigned again: DNSKEY %v", a.Answer)
	}
}

// TestResigned checks that the renewal step re-signs the signatures due
// and only those, sharing the rest.
func TestResigned(t *testing.T) {
	now := time.Now()
	// Validity 10 days, renewal at half of it, jitter up to 40 %: at
	// now + 4 days only the RRsets whose jitter passed 20 % are due.
	s := newSigner(t, "sign.test.", dnssec.Options{Validity: 10 * 24 * time.Hour, Refresh: 0.5, Jitter: 0.4})
	var b strings.Builder
	b.WriteString(signText)
	for i := range 100 {
		fmt.Fprintf(&b, "h%d IN A 10.0.0.%d\n", i, i)
	}
	set, z := signedSet(t, "sign.test.", b.String(), s, now, nil)
	total := s.Made(dnssec.ReasonLoad)
	if same, err := z.Resigned(now.Add(time.Hour), 2); err != nil || same != z {
		t.Fatalf("nothing due: %v %v", same == z, err)
	}
	later := now.Add(4 * 24 * time.Hour)
	nz, err := z.Resigned(later, 2)
	if err != nil || nz == z {
		t.Fatal(err)
	}
	renewed := s.Made(dnssec.ReasonRenew)
	if renewed == 0 || renewed >= total {
		t.Errorf("%d of %d signatures renewed, want some", renewed, total)
	}
	nset := zone.NewSet([]*zone.Zone{nz})
	nset.Precompile()
	refresh, expire := nz.SignatureTimes()
	if refresh <= uint32(later.Unix()) || expire <= refresh {
		t.Errorf("after renewal: refresh %d expire %d, now %d", refresh, expire, later.Unix())
	}
	if r, _ := z.SignatureTimes(); r > uint32(later.Unix()) {
		t.Errorf("before renewal: refresh %d after %d", r, later.Unix())
	}
	var a zone.Answer
	for i := range 100 {
		name := fmt.Sprintf("h%d.sign.test.", i)
		nset.LookupWith(&a, name, dns.TypeA, nil, do())
		verifySection(t, name, a.Answer, s, later, nil)
		_, _, n := nset.Classify(name)
		var m dns.Msg
		tpl := n.TemplateDO(dns.TypeA)
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		qw, _ := q.Pack()
		if err := m.Unpack(append(append(append([]byte{}, tpl[:12]...), qw[12:]...), tpl[12:]...)); err != nil {
			t.Fatal(err)
		}
		verifySection(t, name+" template", m.Answer, s, later, nil)
	}
	// The old zone is left as it was.
	set.LookupWith(&a, "sign.test.", dns.TypeSOA, nil, do())
	verifySection(t, "old SOA", a.Answer, s, now, nil)
	if again, _ := nz.Resigned(later, 2); again != nz {
		t.Error("a renewed zone is due again at once")
	}
}

// TestSignWithSerial checks that a new exported serial gets its SOA
// signed.
func TestSignWithSerial(t *testing.T) {
	now := time.Now()
	s := newSigner(t, "sign.test.", dnssec.Options{})
	_, z := signedSet(t, "sign.test.", signText, s, now, nil)
	nz, errs := z.WithSerial(77)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	set := zone.NewSet([]*zone.Zone{nz})
	set.Precompile()
	var a zone.Answer
	set.LookupWith(&a, "sign.test.", dns.TypeSOA, nil, do())
	if a.Answer[0].(*dns.SOA).Serial != 77 {
		t.Fatal(a.Answer)
	}
	verifySection(t, "SOA", a.Answer, s, now, nil)
	_, _, n := set.Classify("sign.test.")
	if n.TemplateDO(dns.TypeSOA) == nil || !bytes.Contains(n.TemplateDO(dns.TypeSOA), []byte{0, 0, 0, 77}) {
		t.Error("the apex's DO template has the old serial")
	}
}

// BenchmarkSignZone signs a zone of 1,000 A RRsets (and precompiles it,
// DO templates and all) on two workers: the start-up cost of signing.
func BenchmarkSignZone(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(signText)
	for i := range 1000 {
		fmt.Fprintf(&sb, "h%d IN A 10.0.%d.%d\n", i, i/250, i%250)
	}
	text := []byte(sb.String())
	s := newSigner(b, "sign.test.", dnssec.Options{})
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		z, errs, _ := zone.Parse(nil, "sign.test.", "sign.test.zone", text)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		if err := z.Sign(s, now, 2); err != nil {
			b.Fatal(err)
		}
		zone.NewSet([]*zone.Zone{z}).Precompile()
	}
}

// failingKey is a private key whose every signature fails, as a key on
// a token that went away would.
type failingKey struct{ crypto.Signer }

func (failingKey) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("token removed")
}

// TestSignFails checks that a zone whose signing fails says so (the
// snapshot then serves it as a zone that failed to load).
func TestSignFails(t *testing.T) {
	k := memKey(t, "sign.test.", dns.ECDSAP256SHA256, true)
	k.Signer = failingKey{k.Signer}
	s := newSigner(t, "sign.test.", dnssec.Options{}, k)
	z, _ := mustParse(t, "sign.test.", signText)
	if err := z.Sign(s, time.Now(), 2); err == nil || !strings.Contains(err.Error(), "token removed") {
		t.Fatalf("Sign = %v, want the key's error", err)
	}
	other := newSigner(t, "other.test.", dnssec.Options{})
	z, _ = mustParse(t, "sign.test.", signText)
	if err := z.Sign(other, time.Now(), 1); err == nil {
		t.Fatal("signed with another zone's signer")
	}
}

// TestSignedRRSIGQuery checks that a query of type RRSIG with DO gets
// every RRSIG at the name (a NODATA would contradict the NSEC bitmap),
// and without DO the unsigned zone's answer.
func TestSignedRRSIGQuery(t *testing.T) {
	s := newSigner(t, "sign.test.", dnssec.Options{})
	set, _ := signedSet(t, "sign.test.", signText, s, time.Now(), nil)
	var a zone.Answer
	set.LookupWith(&a, "www.sign.test.", dns.TypeRRSIG, nil, do())
	if len(a.Answer) != 2 || countType(a.Answer, dns.TypeRRSIG) != 2 {
		t.Errorf("www RRSIG: %v, want the A's and the AAAA's", a.Answer)
	}
	set.LookupWith(&a, "q.wild.sign.test.", dns.TypeRRSIG, nil, do())
	if len(a.Answer) != 1 || a.Answer[0].Header().Name != "q.wild.sign.test." {
		t.Errorf("wildcard RRSIG: %v", a.Answer)
	}
	set.LookupWith(&a, "www.sign.test.", dns.TypeRRSIG, nil, nil)
	if len(a.Answer) != 0 || a.Rcode != dns.RcodeSuccess {
		t.Errorf("www RRSIG without DO: %v", a.Answer)
	}
}
