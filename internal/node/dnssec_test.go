//go:build !race

package node

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/explain"
)

// writeKey makes a key pair for zone (a CSK when sep) and writes it into
// dir in dnssec-keygen's form, the private file 0600; it returns the
// pair's base name and its DNSKEY.
func writeKey(t *testing.T, dir, zone string, sep bool) (string, *dns.DNSKEY) {
	t.Helper()
	dk := &dns.DNSKEY{Hdr: dns.RR_Header{Name: dns.Fqdn(zone), Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: dns.ZONE, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	if sep {
		dk.Flags |= dns.SEP
	}
	pk, err := dk.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("K%s+%03d+%05d", dk.Hdr.Name, dk.Algorithm, dk.KeyTag())
	if err := os.WriteFile(filepath.Join(dir, base+".key"), []byte("; a test key\n"+dk.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, base+".private"), []byte(dk.PrivateKeyString(pk.(crypto.PrivateKey))), 0o600); err != nil {
		t.Fatal(err)
	}
	return base, dk
}

// signedZone is the zone the DNSSEC tests serve: names of several types,
// a delegation with a DS and glue.
func signedZone(serial int, txt string) string {
	return fmt.Sprintf(`$ORIGIN example.com.
$TTL 300
@      SOA  ns1 hostmaster %d 7200 3600 1209600 60
       NS   ns1
       MX   10 mail
ns1    A    192.0.2.53
mail   A    192.0.2.25
www    A    192.0.2.80
www    A    192.0.2.81
www    AAAA 2001:db8::80
gen    TXT  %q
alias  CNAME www
sub    NS   ns.sub
sub    DS   12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub A    192.0.2.54
`, serial, txt)
}

// verified checks that every RRset of r's answer and authority sections
// carries RRSIGs by the key that verify now (miekg's Verify, as a
// validator computes it), and returns the signatures.
func verified(t *testing.T, r *dns.Msg, key *dns.DNSKEY, what string) []*dns.RRSIG {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess {
		t.Fatalf("%s: rcode %s\n%v", what, dns.RcodeToString[r.Rcode], r)
	}
	if o := r.IsEdns0(); o == nil || !o.Do() {
		t.Fatalf("%s: DO not echoed\n%v", what, r)
	}
	var out []*dns.RRSIG
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		sets := map[[2]any][]dns.RR{}
		sigs := map[[2]any][]*dns.RRSIG{}
		for _, rr := range sec {
			h := rr.Header()
			if s, ok := rr.(*dns.RRSIG); ok {
				k := [2]any{strings.ToLower(h.Name), s.TypeCovered}
				sigs[k] = append(sigs[k], s)
				continue
			}
			k := [2]any{strings.ToLower(h.Name), h.Rrtype}
			sets[k] = append(sets[k], rr)
		}
		for k, set := range sets {
			if k[1] == dns.TypeNS && r.Authoritative && len(r.Answer) == 0 {
				continue // a referral's NS is the child's, unsigned (RFC 4035 §2.2)
			}
			ss := sigs[k]
			if len(ss) == 0 {
				t.Fatalf("%s: %s %s has no RRSIG\n%v", what, k[0], dns.TypeToString[k[1].(uint16)], r)
			}
			for _, s := range ss {
				if err := s.Verify(key, set); err != nil {
					t.Fatalf("%s: RRSIG over %s %s does not verify: %v\n%v", what, k[0], dns.TypeToString[k[1].(uint16)], err, r)
				}
				if !s.ValidityPeriod(time.Now()) {
					t.Fatalf("%s: RRSIG over %s %s not valid now: %v", what, k[0], dns.TypeToString[k[1].(uint16)], s)
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// doQuery asks the node with DO over TCP (whole answers, whatever their
// size).
func (n *testNode) doQuery(name string, qtype uint16) *dns.Msg {
	n.t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, true)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
	if err != nil {
		n.t.Fatalf("query %s: %v", name, err)
	}
	return r
}

// TestSignedZoneServedAcrossReloadAndRenewal: a node serving a signed zone
// answers DO queries whose RRSIGs verify with the zone's key (its steered
// name's too, pre-signed); a reload
// that changes one record re-signs it (and the SOA) and keeps the rest;
// with a validity of seconds the background renews the signatures as
// they fall due — from memory: the key, zone and configuration files are
// gone by then — and the answers keep verifying; status and explain say
// what is signed and until when. Not under -race: it waits for two
// renewals, and there the compile of the steered record alone can take
// longer than the validity of seconds it tests with.
func TestSignedZoneServedAcrossReloadAndRenewal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, key := writeKey(t, dir, "example.com", true)
	writeFile(t, dir, "token", "tok")
	writeFile(t, dir, "example.com.zone", signedZone(1, "v1"))
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [%s], validity: 30s }
records:
  - name: shop.example.com
    ttl: 60
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, base))
	var mu sync.Mutex
	var renewals []Result
	n := startNodeIn(t, dir, Options{AfterReload: func(r Result) {
		if strings.Contains(r.Trigger, "signature renewal") {
			mu.Lock()
			renewals = append(renewals, r)
			mu.Unlock()
		}
	}})

	dnskey := n.doQuery("example.com", dns.TypeDNSKEY)
	verified(t, dnskey, key, "DNSKEY")
	queries := []struct {
		name  string
		qtype uint16
	}{{"example.com", dns.TypeSOA}, {"example.com", dns.TypeNS}, {"example.com", dns.TypeMX},
		{"www.example.com", dns.TypeA}, {"www.example.com", dns.TypeAAAA}, {"gen.example.com", dns.TypeTXT},
		{"alias.example.com", dns.TypeA}, {"sub.example.com", dns.TypeDS}, {"mail.example.com", dns.TypeA},
		{"shop.example.com", dns.TypeA}}
	all := func(what string) map[string]*dns.RRSIG {
		got := map[string]*dns.RRSIG{}
		for _, q := range queries {
			for _, s := range verified(t, n.doQuery(q.name, q.qtype), key, what+" "+q.name+" "+dns.TypeToString[q.qtype]) {
				got[strings.ToLower(s.Hdr.Name)+" "+dns.TypeToString[s.TypeCovered]] = s
			}
		}
		return got
	}
	first := all("at start")
	// Without DO no RRSIG.
	if r := n.query("www.example.com", dns.TypeA); len(r.Answer) != 2 {
		t.Fatalf("without DO: %v", r)
	}

	// A reload that changes one record: that RRset and the SOA are signed
	// anew, every other keeps its signature.
	writeFile(t, dir, "example.com.zone", signedZone(2, "v2"))
	reloadAt := time.Now()
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := all("after the reload")
	for k, s := range second {
		old := first[k]
		same := old != nil && old.Signature == s.Signature
		switch changed := k == "gen.example.com. TXT" || k == "example.com. SOA"; {
		case changed && same:
			t.Errorf("after the reload %s: the signature of the old data is kept", k)
		case !changed && !same && old != nil && reloadAt.Unix() < int64(dnssec.RefreshAt(old, 0.75))-1:
			t.Errorf("after the reload %s: signed anew though unchanged and fresh", k)
		}
	}

	// The files go: a renewal must not read them.
	for _, f := range []string{base + ".key", base + ".private", "example.com.zone", "steer.yaml"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	// Once every signature served after the reload has expired (30 s),
	// answers that verify and hold now have renewed signatures. (With
	// 8 s, a renewal due every 6 s and the expiry alarm at a seventh of
	// the validity left no room for a loaded 2-core machine.)
	dnstest.WaitFor(t, 90*time.Second, "two renewals that made signatures, and 31 s since the reload", func() bool {
		mu.Lock()
		defer mu.Unlock()
		made := 0
		for _, r := range renewals {
			if !r.Applied {
				t.Fatalf("renewal failed: %+v", r)
			}
			if len(r.Changed) > 0 {
				made++
			}
		}
		return made >= 2 && time.Since(reloadAt) > 31*time.Second
	}, func() string { return n.logs.String() })
	all("after renewals")
	if strings.Contains(n.logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", n.logs)
	}

	// Status: the zone's keys, expiry and signatures made.
	code, body := n.call("GET", "/v1/status", "tok", "")
	if code != 200 {
		t.Fatalf("status %d %s", code, body)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Zones) != 1 || st.Zones[0].DNSSEC == nil {
		t.Fatalf("status zones: %s", body)
	}
	ds := st.Zones[0].DNSSEC
	if len(ds.Keys) != 1 || ds.Keys[0].Tag != key.KeyTag() || ds.Keys[0].Role != "CSK" || !strings.Contains(ds.Keys[0].DS, " DS ") {
		t.Errorf("status keys: %+v", ds.Keys)
	}
	if ds.Made["load"] == 0 || ds.Made["renew"] == 0 || ds.Validity != "30s" {
		t.Errorf("status: %+v", ds)
	}
	if now := time.Now(); !ds.EarliestExpiry.After(now) || ds.NextRenewal.After(ds.EarliestExpiry) || ds.Expiring != "" {
		t.Errorf("status times at %v: %+v", now, ds)
	}

	// Metrics: signatures made by reason, the zone's earliest expiry.
	_, metrics := n.call("GET", "/metrics", "", "")
	for _, want := range []string{`steer_dnssec_signatures_total{reason="load",zone="example.com."}`,
		`steer_dnssec_signatures_total{reason="renew",zone="example.com."}`, `steer_dnssec_signature_expires_in_seconds{zone="example.com."}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics have no %s", want)
		}
	}

	// Explain lists the signatures the answer carries, verified.
	rep, err := explain.Run(n.srv.Handler(), explain.Request{Name: "www.example.com", Qtype: dns.TypeA, From: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Signatures) != 1 || !rep.Signatures[0].Verified || rep.Signatures[0].Covers != "A" {
		t.Fatalf("explain signatures: %+v", rep.Signatures)
	}
}
