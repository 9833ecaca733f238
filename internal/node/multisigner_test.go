//go:build !race

package node

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// TestMultiSignerWithKnot is the multi-signer setup (RFC 8901 model 2)
// with real parts: Knot signs Larkbook's zone automatically (a KASP
// policy, NSEC3) as hidden primary; steer transfers it and signs only
// its steered name's answers, with a ZSK of its own. Until Knot
// publishes that ZSK steer serves Knot's data with shop unsteered (its
// stand-in, signed by Knot) and says which DNSKEY to add; once it is
// imported into Knot's DNSKEY set (keymgr import-pub, public only) and
// Knot re-signs and notifies, steer steers shop again, signed. Unbound,
// with Knot's KSK as its only trust anchor, validates through steer the
// steered name for two ECS cases (the right site, AD), the static names,
// a NODATA at the steered name and a nonexistent name; and through Knot
// the static names. steer's transfer out is Knot's zone exactly while
// shop is unsteered, then Knot's with shop's stand-in replaced by the
// fallback signed by steer's ZSK, which dnssec-verify accepts.
func TestMultiSignerWithKnot(t *testing.T) {
	t.Parallel() // waits on Knot, transfers and resolvers
	dnstest.NeedTool(t, "keymgr")
	dnstest.NeedTool(t, "knotc")
	dnstest.NeedTool(t, "unbound")
	const origin = "example.com."
	start := time.Now()

	// steer's ZSK, made as steer dnssec keygen --role zsk makes it.
	sdir := t.TempDir()
	zsk, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, false)
	if err != nil {
		t.Fatal(err)
	}
	zskBase, err := dnssec.WriteKey(sdir, zsk, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// Knot signs the zone: shop's A record is the stand-in steer answers
	// in place of (so that Knot's NSEC3 at shop lists A).
	kdir := t.TempDir()
	zoneFile := filepath.Join(kdir, "example.com.zone")
	writeFile(t, kdir, "example.com.zone", validatortest.LarkbookZone()+"shop IN A 192.0.2.1\n")
	steerPort := dnstest.FreePort(t)
	knot := peertest.StartKnot(t, []peertest.Zone{{Origin: origin, File: zoneFile}}, peertest.Options{
		Top: fmt.Sprintf(`policy:
  - id: signer
    algorithm: ecdsap256sha256
    nsec3: on
    nsec3-iterations: 0
    nsec3-salt-length: 0
remote:
  - id: steer
    address: 127.0.0.1@%d
acl:
  - id: xfr
    address: 127.0.0.1
    action: transfer
`, steerPort),
		Zone: "dnssec-signing: on\ndnssec-policy: signer\nacl: xfr\nnotify: steer\n",
	})
	knotConf := filepath.Join(knot.Dir, "knot.conf")
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}

	city, asn := larkbookGeo(t)
	cfg := fmt.Sprintf(`health: { state_file: state/steer-health.json }
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: example.com
    primaries: [%s]
    dnssec: { keys: [%s] }
    secondaries: [{ address: 127.0.0.1, tsig: knot-key, notify: none }]
geo:
  databases: [%q, %q]
ecs: { enabled: true, max_source_v4: 28, max_source_v6: 56 }
records:
%s`, knot.Addr, filepath.Base(zskBase), city, asn, dnstest.LarkbookRecord())
	writeFile(t, sdir, "steer.yaml", cfg)
	writeFile(t, sdir, "knot.key", keyFile("knot-key"))
	n := startNodeIn(t, sdir, Options{Listen: []string{fmt.Sprintf("127.0.0.1:%d", steerPort)}})
	steerAddr := n.dns

	ask := func(server netip.AddrPort, name string, qtype uint16, ecs string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.SetEdns0(1232, true)
		if ecs != "" {
			p := netip.MustParsePrefix(ecs)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
				SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()})
		}
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(m, server.String())
		if err != nil {
			t.Fatalf("%s %s: %v", name, dns.TypeToString[qtype], err)
		}
		return r
	}
	firstA := func(r *dns.Msg) string {
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				return a.A.String()
			}
		}
		return ""
	}

	// Knot does not publish steer's ZSK yet: steer serves Knot's zone,
	// shop answered by its stand-in, and says what to add.
	dnstest.WaitFor(t, 10*time.Second, "steer to serve the zone from Knot", func() bool {
		return ask(steerAddr, origin, dns.TypeSOA, "").Rcode == dns.RcodeSuccess
	})
	want := "add this DNSKEY to the signer's set: example.com."
	dnstest.WaitFor(t, 5*time.Second, "steer to say which DNSKEY Knot lacks", func() bool { return strings.Contains(n.logs.String(), want) })
	// That is said while the reload is built; its export is offered once
	// the reload is published.
	dnstest.WaitFor(t, 5*time.Second, "steer to offer the zone's export", func() bool {
		_, err := axfrTry(steerAddr, origin, true)
		return err == nil
	})
	before := ask(steerAddr, "shop."+origin, dns.TypeA, berlin)
	if got := firstA(before); got != "192.0.2.1" || len(sigTags(before)) == 0 || sigTags(before)[zsk.Tag] {
		t.Errorf("shop before Knot publishes steer's ZSK: %q signed by %v, want the stand-in 192.0.2.1 signed by Knot\n%v", got, sigTags(before), before)
	}
	// Unsteered, steer transfers out Knot's zone exactly.
	if got, want := axfrTexts(t, steerAddr, origin, true), axfrTexts(t, knot.Addr, origin, false); !slices.Equal(got, want) {
		t.Errorf("steer's export of the unsteered zone is not Knot's:\n%s", rrDiff(got, want))
	}

	// The operator imports steer's public key into Knot's set; Knot
	// re-signs the DNSKEY RRset and notifies steer.
	run("keymgr", "-c", knotConf, origin, "import-pub", zskBase+".key")
	run("knotc", "-c", knotConf, "-t", "5", "zone-sign", origin)
	dnstest.WaitFor(t, 10*time.Second, "steer to steer shop, its ZSK published by Knot", func() bool {
		return firstA(ask(steerAddr, "shop."+origin, dns.TypeA, berlin)) == "198.51.100.20"
	})
	keys := ask(knot.Addr, origin, dns.TypeDNSKEY, "")
	published := false
	for _, rr := range keys.Answer {
		if k, ok := rr.(*dns.DNSKEY); ok && k.PublicKey == zsk.DNSKEY.PublicKey && k.Flags == 256 {
			published = true
		}
	}
	if !published {
		t.Fatalf("Knot's DNSKEY RRset lacks steer's ZSK:\n%v", keys)
	}
	// The steered answer is signed by steer's ZSK, the rest by Knot's keys.
	if tags := sigTags(ask(steerAddr, "shop."+origin, dns.TypeA, berlin)); len(tags) != 1 || !tags[zsk.Tag] {
		t.Errorf("shop A signed by keys %v, want steer's ZSK %d alone", tags, zsk.Tag)
	}
	if tags := sigTags(ask(steerAddr, "static."+origin, dns.TypeA, "")); len(tags) != 1 || tags[zsk.Tag] {
		t.Errorf("static A signed by keys %v, want Knot's ZSK alone", tags)
	}
	// explain verifies both kinds: steer's over the steered answer, the
	// signer's over static data (with the DNSKEY RRset the zone serves).
	for _, q := range []struct {
		name string
		ecs  netip.Prefix
	}{{"shop." + origin, netip.MustParsePrefix(berlin)}, {"static." + origin, netip.Prefix{}}} {
		rep, err := explain.Run(n.srv.Handler(), explain.Request{Name: q.name, Qtype: dns.TypeA, ECS: q.ecs, From: netip.MustParseAddr("127.0.0.1")})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Signatures) != 1 || !rep.Signatures[0].Verified || (rep.Signatures[0].KeyTag == zsk.Tag) != (q.name == "shop."+origin) {
			t.Errorf("explain %s: signatures %+v", q.name, rep.Signatures)
		}
	}
	// steer's export: Knot's records and signatures as they came, but
	// shop's stand-in, replaced by the fallback signed by steer's ZSK;
	// dnssec-verify accepts it.
	var export []string
	dnstest.WaitFor(t, 10*time.Second, "steer's export to carry shop signed by its ZSK", func() bool {
		export = axfrTexts(t, steerAddr, origin, true)
		return slices.ContainsFunc(export, func(l string) bool {
			return strings.HasPrefix(l, "shop."+origin) && strings.Contains(l, "RRSIG\tA ") && strings.Contains(l, fmt.Sprintf(" %d %s ", zsk.Tag, origin))
		})
	})
	knotAll := axfrTexts(t, knot.Addr, origin, false)
	var shopSet []string
	for _, l := range export {
		if strings.HasPrefix(l, "shop."+origin) && (strings.Contains(l, "\tA\t") || strings.Contains(l, "RRSIG\tA ")) {
			shopSet = append(shopSet, l)
		} else if !slices.Contains(knotAll, l) {
			t.Errorf("steer's export has a record Knot's zone lacks: %s", l)
		}
	}
	for _, l := range knotAll {
		isShopA := strings.HasPrefix(l, "shop."+origin) && (strings.Contains(l, "\tA\t") || strings.Contains(l, "RRSIG\tA "))
		if !isShopA && !slices.Contains(export, l) {
			t.Errorf("steer's export lacks Knot's %s", l)
		}
	}
	if len(shopSet) != 2 || strings.Contains(strings.Join(shopSet, "\n"), "192.0.2.1") {
		t.Errorf("shop in the export: %v, want the fallback and steer's RRSIG alone", shopSet)
	}
	file := filepath.Join(t.TempDir(), "export.db")
	writeFile(t, filepath.Dir(file), "export.db", strings.Join(export, "\n")+"\n")
	if out, err := exec.Command("dnssec-verify", "-o", origin, file).CombinedOutput(); err != nil || !strings.Contains(string(out), "Zone fully signed") {
		t.Errorf("dnssec-verify of steer's export: %v\n%s", err, out)
	}
	ready := time.Since(start)

	anchor := validatortest.AnchorFromServer(t, knot.Addr, origin) // Knot's KSK
	viaSteer := validatortest.StartUnbound(t, steerAddr, anchor)
	viaKnot := validatortest.StartUnbound(t, knot.Addr, anchor)
	for _, c := range []struct{ ecs, want string }{{berlin, "198.51.100.20"}, {pune, "203.0.113.10"}} {
		resp := viaSteer.Query(t, "shop."+origin, dns.TypeA, netip.MustParsePrefix(c.ecs))
		validatortest.Validated(t, "steer shop A ECS "+c.ecs, resp)
		if got := firstA(resp); got != c.want {
			t.Errorf("steer shop A ECS %s: %s, want %s", c.ecs, got, c.want)
		}
	}
	static := []struct {
		name  string
		qtype uint16
	}{{origin, dns.TypeSOA}, {origin, dns.TypeMX}, {origin, dns.TypeDNSKEY}, {"static." + origin, dns.TypeA}, {"static." + origin, dns.TypeAAAA},
		{"mail." + origin, dns.TypeA}, {"_https._tcp." + origin, dns.TypeSRV}}
	for _, res := range []*validatortest.Resolver{viaSteer, viaKnot} {
		who := "steer"
		if res == viaKnot {
			who = "knot"
		}
		for _, q := range static {
			resp := res.Query(t, q.name, q.qtype, netip.Prefix{})
			validatortest.Validated(t, fmt.Sprintf("%s %s %s", who, q.name, dns.TypeToString[q.qtype]), resp)
			if len(resp.Answer) == 0 {
				t.Errorf("%s %s %s: no answer", who, q.name, dns.TypeToString[q.qtype])
			}
		}
	}
	// Denials through steer, from Knot's NSEC3 chain: a nonexistent
	// name, and types the steered name lacks (Knot's NSEC3 at shop
	// lists A only).
	for _, q := range []struct {
		name  string
		qtype uint16
		rcode int
	}{{"nope." + origin, dns.TypeA, dns.RcodeNameError}, {"shop." + origin, dns.TypeTXT, dns.RcodeSuccess}, {"shop." + origin, dns.TypeAAAA, dns.RcodeSuccess}} {
		resp := viaSteer.Query(t, q.name, q.qtype, netip.Prefix{})
		what := fmt.Sprintf("steer %s %s", q.name, dns.TypeToString[q.qtype])
		validatortest.Validated(t, what, resp)
		if resp.Rcode != q.rcode || len(resp.Answer) != 0 {
			t.Errorf("%s: rcode %s, %d answers, want %s and none", what, dns.RcodeToString[resp.Rcode], len(resp.Answer), dns.RcodeToString[q.rcode])
		}
	}
	t.Logf("steer steering with its ZSK in Knot's set %v after the start; whole test %v", ready.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// sigTags returns the key tags of the RRSIGs in r's answer section.
func sigTags(r *dns.Msg) map[uint16]bool {
	out := map[uint16]bool{}
	for _, rr := range r.Answer {
		if s, ok := rr.(*dns.RRSIG); ok {
			out[s.KeyTag] = true
		}
	}
	return out
}

// ECS cases of the Larkbook geo data (testdata/geo/README.md): Berlin
// gets eu-central, Pune ap-south.
const (
	berlin = "192.0.2.48/28"
	pune   = "192.0.2.0/28"
)

func larkbookGeo(t *testing.T) (city, asn string) {
	t.Helper()
	city, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	asn, err = filepath.Abs("../../testdata/geo/larkbook-asn.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	return city, asn
}

// axfrTexts transfers origin from server (with the knot-key TSIG when
// signed) and returns its records' text, sorted, each once.
func axfrTexts(t *testing.T, server netip.AddrPort, origin string, signed bool) []string {
	t.Helper()
	texts, err := axfrTry(server, origin, signed)
	if err != nil {
		t.Fatal(err)
	}
	return texts
}

// axfrTry transfers origin from server (over TSIG when signed) and
// returns its records as text, or what went wrong.
func axfrTry(server netip.AddrPort, origin string, signed bool) ([]string, error) {
	m := new(dns.Msg)
	m.SetAxfr(origin)
	tr := &dns.Transfer{DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
	if signed {
		m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
		tr.TsigSecret = map[string]string{"knot-key.": xfrKeys["knot-key"]}
	}
	env, err := tr.In(m, server.String())
	if err != nil {
		return nil, fmt.Errorf("AXFR %s from %s: %v", origin, server, err)
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			return nil, fmt.Errorf("AXFR %s from %s: %v", origin, server, e.Error)
		}
		rrs = append(rrs, e.RR...)
	}
	return rrStrings(rrs), nil
}
