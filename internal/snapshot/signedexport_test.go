package snapshot_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/zone"
)

const exportOrigin = "export.test."

// exportText has what a chain must get right: a delegation with a DS
// and one without (glue below both), a wildcard, an empty non-terminal,
// a DNAME, and names that sort differently in text and canonical order.
const exportText = `$ORIGIN export.test.
$TTL 3600
@ 600 IN SOA ns1 hostmaster 1 7200 3600 1209600 300
@ IN NS ns1
@ IN MX 10 mail
ns1 IN A 192.0.2.1
mail IN A 192.0.2.2
www IN A 192.0.2.3
www IN AAAA 2001:db8::3
a-b IN TXT "before a.b in text, after it canonically (a.b is under b)"
a.b IN TXT "x"
z IN TXT "z"
*.wild IN A 192.0.2.4
sub IN NS ns.sub
sub IN DS 12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub IN A 192.0.2.5
insecure IN NS ns.insecure
ns.insecure IN A 192.0.2.6
dn IN DNAME other.export.test.
deep.ent.x IN TXT "below two empty non-terminals"
`

// signedExportZone parses text, marks steer.export.test as steered (A)
// and signs it with key at now (prev: the zone served before).
func signedExportZone(t *testing.T, text string, key *dnssec.Key, now time.Time, prev *zone.Zone) *zone.Zone {
	t.Helper()
	z, errs, _ := zone.ParseWith(nil, exportOrigin, "export.zone", []byte(text), zone.ParseOptions{Previous: prev})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := z.MarkSteered("steer."+exportOrigin, dns.TypeA); err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner(exportOrigin, []*dnssec.Key{key}, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if prev != nil {
		s = prev.Signer()
	}
	if err := z.Sign(s, now, 2); err != nil {
		t.Fatal(err)
	}
	zone.NewSet([]*zone.Zone{z}).Precompile()
	return z
}

func fallback(addr string) []dns.RR {
	rr, _ := dns.NewRR("steer.export.test. 30 IN A " + addr)
	return []dns.RR{rr}
}

// rrsets groups rrs by owner and type, RRSIGs by owner and the type
// they cover.
func rrsets(rrs []dns.RR) (sets, sigs map[[2]string][]dns.RR) {
	sets, sigs = map[[2]string][]dns.RR{}, map[[2]string][]dns.RR{}
	for _, rr := range rrs {
		h := rr.Header()
		if sig, ok := rr.(*dns.RRSIG); ok {
			k := [2]string{strings.ToLower(h.Name), dns.TypeToString[sig.TypeCovered]}
			sigs[k] = append(sigs[k], rr)
			continue
		}
		k := [2]string{strings.ToLower(h.Name), dns.TypeToString[h.Rrtype]}
		sets[k] = append(sets[k], rr)
	}
	return sets, sigs
}

// checkExport checks e's signatures and chain: every RRset but glue and
// a delegation's NS has a signature by key that verifies at now, those
// have none; the chain (NSEC or NSEC3) closes, covers every name but
// glue once, lists exactly the types at its name.
func checkExport(t *testing.T, e *snapshot.SignedExport, key *dnssec.Key, nsec3 bool, now time.Time) {
	t.Helper()
	if e.RRs[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("export starts with %v", e.RRs[0])
	}
	sets, sigs := rrsets(e.RRs)
	glue := map[string]bool{"ns.sub.export.test.": true, "ns.insecure.export.test.": true}
	unsigned := func(k [2]string) bool {
		return glue[k[0]] || (k[1] == "NS" && (k[0] == "sub.export.test." || k[0] == "insecure.export.test."))
	}
	types := map[string][]uint16{} // what the chain must list
	for k, set := range sets {
		s := sigs[k]
		if unsigned(k) {
			if len(s) != 0 {
				t.Errorf("%v is signed: %v", k, s)
			}
		} else {
			if len(s) != 1 {
				t.Errorf("%v has %d signatures, want 1", k, len(s))
				continue
			}
			sig := s[0].(*dns.RRSIG)
			if err := sig.Verify(key.DNSKEY, set); err != nil {
				t.Errorf("%v: signature does not verify: %v", k, err)
			}
			if !sig.ValidityPeriod(now) {
				t.Errorf("%v: signature not valid now", k)
			}
		}
		if glue[k[0]] || k[1] == "NSEC" || k[1] == "NSEC3" {
			continue
		}
		types[k[0]] = append(types[k[0]], dns.StringToType[k[1]])
	}
	for k := range sigs {
		if sets[k] == nil {
			t.Errorf("signatures of %v, which the export lacks", k)
		}
	}
	soa := e.RRs[0].(*dns.SOA)
	ttl := min(soa.Hdr.Ttl, soa.Minttl)
	var chain []dns.RR
	for _, rr := range e.RRs {
		if rt := rr.Header().Rrtype; rt == dns.TypeNSEC || rt == dns.TypeNSEC3 {
			chain = append(chain, rr)
			if rr.Header().Ttl != ttl {
				t.Errorf("%s %s TTL %d, want %d (RFC 9077 §3)", rr.Header().Name, dns.TypeToString[rt], rr.Header().Ttl, ttl)
			}
		}
	}
	if !nsec3 {
		names := make([]string, 0, len(types))
		for n := range types {
			names = append(names, n)
		}
		slices.SortFunc(names, dnssec.CanonicalCompare)
		if len(chain) != len(names) {
			t.Fatalf("%d NSEC records for %d names:\n%v", len(chain), len(names), chain)
		}
		for i, name := range names {
			n := chain[i].(*dns.NSEC) // the export keeps them in chain order
			next := names[(i+1)%len(names)]
			if n.Hdr.Name != name || n.NextDomain != next {
				t.Errorf("NSEC %d: %s → %s, want %s → %s", i, n.Hdr.Name, n.NextDomain, name, next)
			}
			want := append(slices.Clone(types[name]), dns.TypeNSEC, dns.TypeRRSIG)
			slices.Sort(want)
			if !slices.Equal(n.TypeBitMap, want) {
				t.Errorf("NSEC %s bitmap %v, want %v", name, n.TypeBitMap, want)
			}
		}
		if last := chain[len(chain)-1].(*dns.NSEC); last.NextDomain != exportOrigin {
			t.Errorf("the chain does not close: last %s → %s", last.Hdr.Name, last.NextDomain)
		}
		return
	}
	// NSEC3: every name and every empty non-terminal (ent.x, x), by hash.
	want := map[string][]uint16{}
	for n, ts := range types {
		bm := slices.Clone(ts)
		if n != "insecure.export.test." {
			bm = append(bm, dns.TypeRRSIG)
		}
		slices.Sort(bm)
		want[strings.ToLower(dns.HashName(n, dns.SHA1, 0, ""))+"."+exportOrigin] = bm
	}
	for _, ent := range []string{"ent.x.export.test.", "x.export.test.", "b.export.test.", "wild.export.test."} {
		want[strings.ToLower(dns.HashName(ent, dns.SHA1, 0, ""))+"."+exportOrigin] = nil
	}
	if len(chain) != len(want) {
		t.Fatalf("%d NSEC3 records, want %d", len(chain), len(want))
	}
	for i, rr := range chain {
		n := rr.(*dns.NSEC3)
		bm, ok := want[n.Hdr.Name]
		if !ok {
			t.Errorf("NSEC3 %s hashes no name of the zone", n.Hdr.Name)
			continue
		}
		if !slices.Equal(n.TypeBitMap, bm) && !(len(bm) == 0 && len(n.TypeBitMap) == 0) {
			t.Errorf("NSEC3 %s bitmap %v, want %v", n.Hdr.Name, n.TypeBitMap, bm)
		}
		if n.Flags != 0 || n.Iterations != 0 || n.Salt != "" {
			t.Errorf("NSEC3 %s: flags %d iterations %d salt %q, want 0 0 \"\"", n.Hdr.Name, n.Flags, n.Iterations, n.Salt)
		}
		next := chain[(i+1)%len(chain)].Header().Name
		if !strings.EqualFold(n.NextDomain+"."+exportOrigin, next) {
			t.Errorf("NSEC3 %d: next %s, want %s", i, n.NextDomain, next)
		}
		if i > 0 && strings.Compare(chain[i-1].Header().Name, n.Hdr.Name) >= 0 {
			t.Errorf("NSEC3 %d not in hash order: %s after %s", i, n.Hdr.Name, chain[i-1].Header().Name)
		}
	}
	if sets[[2]string{exportOrigin, "NSEC3PARAM"}] == nil {
		t.Error("no NSEC3PARAM at the apex")
	}
}

// dnssecVerify runs BIND's dnssec-verify on rrs (-z: the key is a CSK,
// whose KSK flag does not make it a KSK only) and fails on its
// complaint.
func dnssecVerify(t *testing.T, rrs []dns.RR) {
	t.Helper()
	dnstest.NeedTool(t, "dnssec-verify")
	file := filepath.Join(t.TempDir(), "export.zone")
	var b strings.Builder
	for _, rr := range rrs {
		b.WriteString(rr.String() + "\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("dnssec-verify", "-z", "-o", exportOrigin, file).CombinedOutput()
	if err != nil {
		t.Fatalf("dnssec-verify: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Zone fully signed") {
		t.Errorf("dnssec-verify:\n%s", out)
	}
}

func TestSignedExport(t *testing.T) {
	key, err := dnssec.GenerateKey(exportOrigin, dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, denial := range []string{dnssec.DenialNSEC, dnssec.DenialNSEC3} {
		t.Run(denial, func(t *testing.T) {
			nsec3 := denial == dnssec.DenialNSEC3
			z := signedExportZone(t, exportText, key, now, nil)
			e, err := snapshot.BuildSignedExport(z, fallback("198.51.100.1"), denial, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			checkExport(t, e, key, nsec3, now)
			dnssecVerify(t, e.RRs)
			if !e.Reusable(z, fallback("198.51.100.1"), now) || e.Reusable(z, fallback("198.51.100.2"), now) || e.Reusable(z, fallback("198.51.100.1"), e.Refresh) {
				t.Error("Reusable: the same zone and fallbacks before the refresh point only")
			}
			t.Logf("%s: %d records, %d signatures made", denial, len(e.RRs), e.Made)

			// A reload adding one name: the zone signs that name's
			// RRset, the export the new name's NSEC (NSEC3) and the one
			// before it, nothing else.
			later := now.Add(time.Minute)
			z2 := signedExportZone(t, exportText+"new IN TXT \"new\"\n", key, later, z)
			e2, err := snapshot.BuildSignedExport(z2, fallback("198.51.100.1"), denial, e, later)
			if err != nil {
				t.Fatal(err)
			}
			checkExport(t, e2, key, nsec3, later)
			if e2.Made != 2 {
				t.Errorf("adding one name made %d export signatures (kept %d), want 2: the new name's and its predecessor's", e2.Made, e2.Kept)
			}
			// The fallback moves: its RRset is signed again, the chain
			// is kept.
			e3, err := snapshot.BuildSignedExport(z2, fallback("198.51.100.2"), denial, e2, later)
			if err != nil {
				t.Fatal(err)
			}
			checkExport(t, e3, key, nsec3, later)
			if e3.Made != 1 {
				t.Errorf("a new fallback made %d export signatures, want 1", e3.Made)
			}
			// Past the refresh point every export signature is made anew.
			renew := e3.Refresh.Add(time.Second)
			e4, err := snapshot.BuildSignedExport(z2, fallback("198.51.100.2"), denial, e3, renew)
			if err != nil {
				t.Fatal(err)
			}
			if e4.Made == 0 || !e4.Refresh.After(e3.Refresh) {
				t.Errorf("after the refresh point: %d made, refresh %v (was %v)", e4.Made, e4.Refresh, e3.Refresh)
			}
			del, add := 0, 0
			old, _ := rrsets(e2.RRs)
			cur, _ := rrsets(e3.RRs)
			for k := range old {
				if cur[k] == nil {
					del++
				}
			}
			for k := range cur {
				if old[k] == nil {
					add++
				}
			}
			if del != 0 || add != 0 {
				t.Errorf("a fallback change changed the sets: -%d +%d", del, add)
			}
		})
	}
}

func TestSignedExportRefusesUnsigned(t *testing.T) {
	z, errs, _ := zone.ParseWith(nil, exportOrigin, "export.zone", []byte(exportText), zone.ParseOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := snapshot.BuildSignedExport(z, nil, dnssec.DenialNSEC, nil, time.Now()); err == nil || !strings.Contains(err.Error(), "not a signed zone") {
		t.Errorf("unsigned zone: %v", err)
	}
}

// TestSignedExportCost measures what a reload changing one RRset costs
// the export of a zone of 3,000 names: the first export signs every
// NSEC3 record, the next only the changed name's and, for a new name,
// its predecessor's.
func TestSignedExportCost(t *testing.T) {
	key, err := dnssec.GenerateKey(exportOrigin, dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(exportText)
	for i := range 3000 {
		fmt.Fprintf(&b, "host%d IN A 192.0.2.%d\n", i, i%250+1)
	}
	now := time.Now()
	start := time.Now()
	z := signedExportZone(t, b.String(), key, now, nil)
	signZone := time.Since(start)
	start = time.Now()
	e, err := snapshot.BuildSignedExport(z, fallback("198.51.100.1"), dnssec.DenialNSEC3, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	b.WriteString("host3000 IN A 192.0.2.1\n")
	later := now.Add(time.Minute)
	start = time.Now()
	z2 := signedExportZone(t, b.String(), key, later, z)
	resignZone := time.Since(start)
	start = time.Now()
	e2, err := snapshot.BuildSignedExport(z2, fallback("198.51.100.1"), dnssec.DenialNSEC3, e, later)
	if err != nil {
		t.Fatal(err)
	}
	incr := time.Since(start)
	if e2.Made != 2 || e.Made < 3000 {
		t.Errorf("export signatures: %d at first, %d after adding a name (want ≥ 3000, 2)", e.Made, e2.Made)
	}
	t.Logf("3,000-name zone, NSEC3: zone signed in %v, first export %v (%d records, %d signatures); one name added: zone re-signed in %v, export %v (%d signatures made, %d kept)",
		signZone.Round(time.Millisecond), full.Round(time.Millisecond), len(e.RRs), e.Made,
		resignZone.Round(time.Millisecond), incr.Round(time.Millisecond), e2.Made, e2.Kept)
}
