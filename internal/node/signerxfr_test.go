//go:build !race

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// signerXfr is what TestSignedTransfersOut adds for zones signed
// elsewhere (BIND's dnssec-signzone signing them, as a signer would),
// transferred out by steer to its NSD and Knot: a multi-signer zone
// (NSEC3) whose DNSKEY RRset holds steer's ZSK, with a steered name
// whose stand-in the export replaces by the fallback signed with that
// ZSK; and a pre-signed zone (NSEC) without steered names, exported
// exactly as signed, IXFR included.
type signerXfr struct {
	t    *testing.T
	dir  string // steer's
	kdir string // the signer's keys
	zsk  string // steer's ZSK (base name, in dir)
	// anchors are the signer's KSKs, by zone.
	anchors map[string]validatortest.Anchor
	// preFile is the pre-signed zone as signed, by serial.
	preFile map[int]string
}

const (
	multiOrigin = "multi.xfr.test."
	preOrigin   = "pre.xfr.test."
)

var signerXfrOrigins = []string{multiOrigin, preOrigin}

// signerXfrZone is a zone for the signer; extra is added.
func signerXfrZone(origin string, serial int, extra string) string {
	return fmt.Sprintf(`$ORIGIN %s
$TTL 300
@    SOA  ns1 hostmaster %d 7200 3600 1209600 60
@    NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.80
%s`, origin, serial, extra)
}

// newSignerXfr makes the signer's keys and steer's ZSK and writes both
// zones, signed, into dir.
func newSignerXfr(t *testing.T, dir string) *signerXfr {
	s := &signerXfr{t: t, dir: dir, kdir: t.TempDir(), anchors: map[string]validatortest.Anchor{}, preFile: map[int]string{}}
	dnstest.NeedTool(t, "dnssec-signzone")
	base, zsk := writeKey(t, dir, multiOrigin, false)
	s.zsk = base
	for _, o := range signerXfrOrigins {
		s.run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", s.kdir, o)
		s.run("dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-K", s.kdir, o)
	}
	// shop's A is the stand-in steer answers in place of; steer's ZSK
	// is in the signer's DNSKEY RRset.
	s.sign(multiOrigin, 1, "shop A 192.0.2.1\n"+zsk.String()+"\n")
	s.sign(preOrigin, 1, "")
	return s
}

func (s *signerXfr) run(name string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = s.kdir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// sign signs origin's zone at serial (NSEC3 for the multi-signer zone,
// NSEC for the other) into dir/<origin>signed.
func (s *signerXfr) sign(origin string, serial int, extra string) {
	s.t.Helper()
	in := filepath.Join(s.kdir, origin+"in")
	if err := os.WriteFile(in, []byte(signerXfrZone(origin, serial, extra)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	out := filepath.Join(s.dir, origin+"signed")
	args := []string{"-q", "-S", "-K", s.kdir, "-o", origin, "-f", out + ".tmp"}
	if origin == multiOrigin {
		args = append(args, "-3", "-", "-H", "0")
	}
	s.run("dnssec-signzone", append(args, in)...)
	if err := os.Rename(out+".tmp", out); err != nil {
		s.t.Fatal(err)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		s.t.Fatal(err)
	}
	if origin == preOrigin {
		s.preFile[serial] = string(text)
	}
	var keys []dns.RR
	for _, rr := range parseRRs(s.t, origin, string(text)) {
		if rr.Header().Rrtype == dns.TypeDNSKEY {
			keys = append(keys, rr)
		}
	}
	s.anchors[origin] = validatortest.NewAnchor(s.t, origin, keys)
}

// parseRRs reads a zone's records from master-file text.
func parseRRs(t *testing.T, origin, text string) []dns.RR {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(text), origin, "")
	var out []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		out = append(out, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// config adds both zones, transferred to the NSD and Knot of
// signedXfrConfig's keys (notify as there), and the multi-signer zone's
// steered name to base, a configuration of signedXfrConfig.
func (s *signerXfr) config(base string, notify map[string]int) string {
	var b strings.Builder
	for _, o := range signerXfrOrigins {
		fmt.Fprintf(&b, "  - origin: %s\n    file: %ssigned\n", o, o)
		if o == multiOrigin {
			// Longer than dnssec-signzone's 30 days: the export keeps
			// steer's signatures for the signer's serial.
			fmt.Fprintf(&b, "    dnssec: { keys: [%s], validity: 60d }\n", s.zsk)
		} else {
			b.WriteString("    dnssec: { presigned: true }\n")
		}
		b.WriteString("    secondaries:\n")
		for _, k := range []string{"nsd-key", "knot-key"} {
			n := "none"
			if p := notify[k]; p != 0 {
				n = fmt.Sprintf("127.0.0.1:%d", p)
			}
			fmt.Fprintf(&b, "      - { address: 127.0.0.1, tsig: %s, notify: %q }\n", k, n)
		}
	}
	cfg := strings.Replace(base, "records:\n", b.String()+"records:\n", 1)
	return cfg + fmt.Sprintf(`  - name: shop.%s
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { failover: [other, de] }
`, multiOrigin)
}

// peerZones are the zones for a peer, its copies in dir with prefix.
func (s *signerXfr) peerZones(dir, prefix string) []peertest.Zone {
	var zs []peertest.Zone
	for _, o := range signerXfrOrigins {
		zs = append(zs, peertest.Zone{Origin: o, File: filepath.Join(dir, prefix+"."+o+"db")})
	}
	return zs
}

// wait waits for each peer to serve origin at serial.
func (s *signerXfr) wait(peers []*peertest.Server, origin string, serial uint32) {
	s.t.Helper()
	for _, p := range peers {
		dnstest.WaitFor(s.t, 45*time.Second, fmt.Sprintf("%s to serve %s serial %d", p.Name, origin, serial), func() bool { return soaSerial(p, origin) == serial })
	}
}

// signerXfrQuery is a query for delv in one of the zones; neg: a denial.
type signerXfrQuery struct {
	origin, name string
	qtype        uint16
	neg          bool
}

// signerXfrQueries are the first check's: the multi-signer zone's
// steered name, its other data and denials (a nonexistent name, NODATA at
// the steered name, from the signer's NSEC3), and the pre-signed zone's.
var signerXfrQueries = []signerXfrQuery{
	{multiOrigin, "shop." + multiOrigin, dns.TypeA, false}, {multiOrigin, multiOrigin, dns.TypeSOA, false},
	{multiOrigin, multiOrigin, dns.TypeDNSKEY, false}, {multiOrigin, "www." + multiOrigin, dns.TypeA, false},
	{multiOrigin, "nope." + multiOrigin, dns.TypeA, true}, {multiOrigin, "shop." + multiOrigin, dns.TypeTXT, true},
	{preOrigin, preOrigin, dns.TypeSOA, false}, {preOrigin, "www." + preOrigin, dns.TypeA, false},
	{preOrigin, "nope." + preOrigin, dns.TypeA, true},
}

// check validates through each peer, with the signer's KSK as trust
// anchor, the multi-signer zone's steered name (the fallback shop, signed
// by steer's ZSK), its other data and denials, and the pre-signed zone
// (signerXfrQueries; at a later serial of the pre-signed zone, the
// changes only);
// dnssec-verify accepts each peer's copy of each zone; the pre-signed
// zone's copies, and steer's own AXFR of it, are the signed file at
// preSerial record for record.
func (s *signerXfr) check(what string, n *testNode, peers []*peertest.Server, shop string, preSerial int) {
	t := s.t
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%s: checked in %v", what, time.Since(start).Round(time.Millisecond)) }()
	qs := signerXfrQueries
	if preSerial > 1 {
		// After the changes: the fallback exported (kept at the
		// multi-signer zone's serial), and the signer's change.
		qs = []signerXfrQuery{{multiOrigin, "shop." + multiOrigin, dns.TypeA, false}, {preOrigin, "added." + preOrigin, dns.TypeTXT, false}}
	}
	var jobs []validatortest.DelvJob
	var via []string
	var neg []bool
	for _, p := range peers {
		d := map[string]*validatortest.Delv{}
		for _, o := range signerXfrOrigins {
			d[o] = validatortest.NewDelv(t, p.Addr, s.anchors[o])
		}
		for _, x := range qs {
			jobs = append(jobs, validatortest.DelvJob{Delv: d[x.origin], Query: validatortest.DelvQuery{Name: x.name, Qtype: x.qtype}})
			via, neg = append(via, p.Name), append(neg, x.neg)
		}
	}
	for i, r := range validatortest.RunDelv(jobs) {
		if neg[i] && !r.Negative || !neg[i] && !r.Validated {
			t.Errorf("%s: via %s: want %s:\n%v", what, via[i], map[bool]string{false: "fully validated", true: "negative response, fully validated"}[neg[i]], r)
		}
		if r.Name == "shop."+multiOrigin && r.Qtype == dns.TypeA && (len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != shop) {
			t.Errorf("%s: via %s: shop: %v, want the fallback %s alone (no stand-in beside it)", what, via[i], r.Answer, shop)
		}
	}
	want := rrStrings(parseRRs(t, preOrigin, s.preFile[preSerial]))
	for _, p := range peers {
		for _, o := range signerXfrOrigins {
			file, records := axfrFile(t, p, o)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, err := exec.CommandContext(ctx, "dnssec-verify", "-o", o, file).CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), "Zone fully signed") {
				t.Errorf("%s: dnssec-verify of %s's %s (%d records): %v\n%s", what, p.Name, o, records, err, out)
			}
			if o == preOrigin {
				text, _ := os.ReadFile(file)
				if got := rrStrings(parseRRs(t, o, string(text))); !slices.Equal(got, want) {
					t.Errorf("%s: %s's copy of %s is not the signed zone at serial %d:\n%s", what, p.Name, o, preSerial, rrDiff(got, want))
				}
			}
		}
	}
	// steer's own AXFR (signed with a secondary's key).
	m := new(dns.Msg)
	m.SetAxfr(preOrigin)
	m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
	tr := &dns.Transfer{TsigSecret: map[string]string{"knot-key.": xfrKeys["knot-key"]}, DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
	env, err := tr.In(m, n.dns.String())
	if err != nil {
		t.Fatal(err)
	}
	var got []dns.RR
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR %s from steer: %v", preOrigin, e.Error)
		}
		got = append(got, e.RR...)
	}
	if g := rrStrings(got); !slices.Equal(g, want) {
		t.Errorf("%s: steer's AXFR of %s is not the signed zone at serial %d:\n%s", what, preOrigin, preSerial, rrDiff(g, want))
	}
}

// rrStrings is the records' text, sorted, each once (an AXFR's copy
// has its SOA twice).
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// rrDiff lists what got has that want lacks (+) and the reverse (-).
func rrDiff(got, want []string) string {
	var b strings.Builder
	for _, g := range got {
		if !slices.Contains(want, g) {
			b.WriteString("+ " + g + "\n")
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			b.WriteString("- " + w + "\n")
		}
	}
	return b.String()
}
