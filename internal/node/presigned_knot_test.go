//go:build !race

package node

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// presignedZone is a zone for Knot to sign, with a case of every proof:
// a wildcard, an empty non-terminal, a CNAME, a DNAME, a delegation with
// a DS and one without.
func presignedZone(origin string) string {
	return fmt.Sprintf(`$ORIGIN %s
$TTL 300
@ IN SOA ns1 hostmaster 1 7200 600 1209600 60
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
dn IN DNAME www.%s
`, origin, origin)
}

// TestPresignedSecondaryOfKnot: Knot signs two zones automatically as a
// hidden primary (keys it makes itself in its KASP database; one zone
// NSEC3, one NSEC) and steer is their secondary with no key. delv,
// anchored at the KSK Knot publishes, validates every name and type of
// each zone from steer, NODATA cases, and 100 names that do not exist
// (NSEC3) and 30 (NSEC); a record Knot adds and signs reaches steer by
// IXFR and validates too.
func TestPresignedSecondaryOfKnot(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "knotc")
	dnstest.NeedTool(t, "delv")
	steerPort := dnstest.FreePort(t)
	dir := t.TempDir()
	origins := []string{"pre3.test.", "pre1.test."}
	policy := map[string]string{"pre3.test.": "nsec3", "pre1.test.": "nsec"}
	var zones []peertest.Zone
	for _, o := range origins {
		file := filepath.Join(dir, o+"zone")
		writeFile(t, dir, o+"zone", presignedZone(o))
		zones = append(zones, peertest.Zone{Origin: o, File: file,
			Config: "dnssec-signing: on\ndnssec-policy: " + policy[o] + "\nacl: xfr\nnotify: steer\njournal-content: changes\n"})
	}
	knot := peertest.StartKnot(t, zones, peertest.Options{Top: fmt.Sprintf(`policy:
  - id: nsec3
    algorithm: ecdsap256sha256
    nsec3: on
    nsec3-iterations: 1
    nsec3-salt-length: 4
  - id: nsec
    algorithm: ecdsap256sha256
remote:
  - id: steer
    address: 127.0.0.1@%d
acl:
  - id: xfr
    address: 127.0.0.1
    action: transfer
`, steerPort)})
	var conf strings.Builder
	conf.WriteString("zones:\n")
	for _, o := range origins {
		fmt.Fprintf(&conf, "  - origin: %s\n    primaries: [%s]\n", o, knot.Addr)
	}
	n := startNode(t, map[string]string{"steer.yaml": conf.String()}, Options{Listen: []string{fmt.Sprintf("127.0.0.1:%d", steerPort)}})
	signedSOA := func(origin string) uint32 {
		m := new(dns.Msg)
		m.SetQuestion(origin, dns.TypeSOA)
		m.SetEdns0(1232, true)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	for _, o := range origins {
		dnstest.WaitFor(t, 10*time.Second, "steer serving "+o+" signed", func() bool { return signedSOA(o) != 0 }, n.logs.String)
	}
	if s := n.srv.Handler().Snapshot().Summary(); !strings.Contains(s, "2 pre-signed") {
		t.Errorf("summary: %s", s)
	}

	delvs := map[string]*validatortest.Delv{}
	var jobs []validatortest.DelvJob
	negative := map[int]bool{}
	add := func(o string, q validatortest.DelvQuery, neg bool) {
		if neg {
			negative[len(jobs)] = true
		}
		jobs = append(jobs, validatortest.DelvJob{Delv: delvs[o], Query: q})
	}
	for _, o := range origins {
		delvs[o] = validatortest.NewDelv(t, n.dns, validatortest.AnchorFromServer(t, knot.Addr, o))
		for _, q := range validatortest.RRsets(t, o, presignedZone(o)) {
			if strings.HasPrefix(q.Name, "ns.") || q.Qtype == dns.TypeNS && q.Name != o {
				continue // glue and delegations: the child's to answer
			}
			add(o, q, false)
		}
		for _, q := range []validatortest.DelvQuery{{Name: o, Qtype: dns.TypeDNSKEY}, {Name: o, Qtype: dns.TypeNSEC3PARAM}} {
			if q.Qtype == dns.TypeNSEC3PARAM && policy[o] != "nsec3" {
				continue
			}
			add(o, q, false)
		}
		for _, q := range []validatortest.DelvQuery{
			{Name: "www." + o, Qtype: dns.TypeMX}, {Name: "a.ent." + o, Qtype: dns.TypeA},
			{Name: "x.wild." + o, Qtype: dns.TypeMX}, {Name: "insecure." + o, Qtype: dns.TypeDS},
			{Name: "alias." + o, Qtype: dns.TypeAAAA},
		} {
			add(o, q, q.Name != "alias."+o)
		}
		count := 100
		if policy[o] == "nsec" {
			count = 30
		}
		for i := range count {
			name := fmt.Sprintf("nx%d.%s", i, o)
			if i%3 == 1 {
				name = fmt.Sprintf("nx%d.a.ent.%s", i, o)
			}
			add(o, validatortest.DelvQuery{Name: name, Qtype: dns.TypeA}, true)
		}
	}
	start := time.Now()
	results := validatortest.RunDelv(jobs)
	for i, r := range results {
		// alias AAAA: the CNAME validates and www's AAAA with it.
		if negative[i] && !r.Negative || !negative[i] && !r.Validated {
			t.Errorf("want %s: %s", map[bool]string{true: "negative response, fully validated", false: "fully validated"}[negative[i]], r)
		}
	}
	t.Logf("%d delv queries in %v", len(jobs), time.Since(start).Round(time.Millisecond))

	// Knot changes and signs the zone; steer takes it by IXFR on the
	// NOTIFY and serves the new record with its signature.
	o := origins[0]
	before := signedSOA(o)
	knotc := func(args ...string) {
		t.Helper()
		out, err := exec.Command("knotc", append([]string{"-c", filepath.Join(knot.Dir, "knot.conf"), "-t", "5"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("knotc %v: %v\n%s", args, err, out)
		}
	}
	knotc("zone-begin", o)
	knotc("zone-set", o, "new", "300", "TXT", "added")
	knotc("zone-commit", o)
	dnstest.WaitFor(t, 10*time.Second, "steer serving Knot's change", func() bool { return signedSOA(o) != before }, n.logs.String)
	ixfr := false
	for _, l := range strings.Split(n.logs.String(), "\n") {
		ixfr = ixfr || strings.Contains(l, "zone transferred") && strings.Contains(l, "zone="+o) && strings.Contains(l, "kind=ixfr")
	}
	if !ixfr {
		t.Errorf("Knot's signed change did not come by IXFR:\n%s", grepLines(n.logs.String(), "transferred"))
	}
	for _, r := range delvs[o].All([]validatortest.DelvQuery{{Name: "new." + o, Qtype: dns.TypeTXT}, {Name: "nz." + o, Qtype: dns.TypeTXT}}) {
		if r.Name == "new."+o && !r.Validated || r.Name == "nz."+o && !r.Negative {
			t.Errorf("after the change: %s", r)
		}
	}
}

// TestPresignedExpiresWhileServed: a zone signed elsewhere whose
// signatures run out while it is served (its signer stopped renewing) is
// answered SERVFAIL from their expiration on, with no reload: the
// renewal timer wakes for it.
func TestPresignedExpiresWhileServed(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "dnssec-signzone")
	origin := "pre1.test."
	var (
		n       *testNode
		expires time.Time
	)
	ask := func() int {
		m := new(dns.Msg)
		m.SetQuestion("www."+origin, dns.TypeA)
		m.SetEdns0(1232, true)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dns.String())
		if err != nil {
			return -1
		}
		return r.Rcode
	}
	// Signatures that expire 6 s after signing, so the test is short; a
	// machine so loaded that the node is not answering before then gets
	// a longer window, twice.
	for window := 6 * time.Second; ; window *= 2 {
		dir := t.TempDir()
		writeFile(t, dir, "z", presignedZone(origin))
		run := func(name string, args ...string) {
			t.Helper()
			cmd := exec.Command(name, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v\n%s", name, args, err, out)
			}
		}
		run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", dir, origin)
		run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-K", dir, origin)
		expires = time.Unix(time.Now().Add(window).Unix(), 0) // whole seconds, as RRSIG times are
		run("dnssec-signzone", "-q", "-S", "-K", dir, "-o", origin, "-s", "now-3600", "-e", fmt.Sprint(expires.Unix()), "-f", filepath.Join(dir, "signed.zone"), "z")
		writeFile(t, dir, "steer.yaml", "zones:\n  - origin: "+origin+"\n    file: signed.zone\n")
		n = startNodeIn(t, dir, Options{})
		rc := ask()
		if time.Now().Before(expires) {
			if rc != dns.RcodeSuccess {
				t.Fatalf("before the expiry: rcode %d", rc)
			}
			break
		}
		if window >= 24*time.Second {
			t.Fatalf("the node did not answer within %v of the zone's signing", window)
		}
		t.Logf("the node answered after the %v signatures expired (a loaded machine): again with a longer window", window)
	}
	dnstest.WaitFor(t, time.Until(expires)+5*time.Second, "SERVFAIL once the signatures expired", func() bool { return ask() == dns.RcodeServerFailure }, n.logs.String)
	if time.Now().Before(expires) {
		t.Errorf("SERVFAIL before the signatures expired")
	}
	// The log says what happened: an expiry, of which zone, when; not
	// a renewal.
	logs := n.logs.String()
	if !hasLine(logs, "level=ERROR", "DNSSEC signatures expired", "zone="+origin, "expired="+expires.UTC().Format(time.RFC3339)) || strings.Contains(logs, "DNSSEC signatures renewed") {
		t.Errorf("the expiry is not logged as one:\n%s", grepLines(logs, "DNSSEC"))
	}
}
