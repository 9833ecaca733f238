//go:build !race

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// The two variants of the signed export, one zone each, served by one
// steer node and transferred by each peer.
var signedXfrZones = []struct{ origin, denial string }{
	{"nsec.xfr.test.", "nsec"},
	{"nsec3.xfr.test.", "nsec3"},
}

// signedXfrZone is a signed zone's file: a delegation with a DS and one
// without (glue below each), a wildcard, an empty non-terminal, a CNAME;
// extra is added (the change the IXFR carries).
func signedXfrZone(origin string, serial int, extra string) string {
	return fmt.Sprintf(`$ORIGIN %s
$TTL 300
@        SOA  ns1 hostmaster %d 7200 3600 1209600 60
@        NS   ns1
@        MX   10 mail
ns1      A    192.0.2.53
mail     A    192.0.2.25
www      A    192.0.2.80
www      AAAA 2001:db8::80
alias    CNAME www
*.wild   A    192.0.2.99
deep.ent TXT  "below an empty non-terminal"
sub      NS   ns.sub
sub      DS   12345 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ns.sub   A    192.0.2.54
insecure NS   ns.insecure
ns.insecure A 192.0.2.55
%s`, origin, serial, extra)
}

// signedXfrConfig is steer's configuration: both zones signed, each with
// a steered name (shop, exported as its fallback), transferred to the
// three peers, each with its own key; notify holds each key's peer port
// (none yet: 0).
func signedXfrConfig(keys map[string]string, notify map[string]int) string {
	var b strings.Builder
	// The steered names' country rule against the small country
	// database, as xfrConfig's: the transfers do not depend on where a
	// client is.
	b.WriteString(`api: { listen: "127.0.0.1:0" }
health: { state_file: state/steer-health.json }
geo: { databases: ["` + smallGeo + `"] }
tsig:
  nsd-key: { secret_file: nsd.key }
  knot-key: { secret_file: knot.key }
  bind-key: { secret_file: bind.key }
zones:
`)
	for _, z := range signedXfrZones {
		fmt.Fprintf(&b, "  - origin: %s\n    file: %s.zone\n    dnssec: { keys: [%s], denial: %s }\n    secondaries:\n", z.origin, z.denial, keys[z.origin], z.denial)
		for _, k := range []string{"nsd-key", "knot-key", "bind-key"} {
			n := "none"
			if p := notify[k]; p != 0 {
				n = fmt.Sprintf("127.0.0.1:%d", p)
			}
			fmt.Fprintf(&b, "      - { address: 127.0.0.1, tsig: %s, notify: %q }\n", k, n)
		}
	}
	b.WriteString("records:\n")
	for _, z := range signedXfrZones {
		fmt.Fprintf(&b, `  - name: shop.%s
    ttl: 30
    pools:
      de: { address: 198.51.100.1 }
      other: { address: 198.51.100.2 }
    rules:
      - match: { country: DE }
        pool: de
      - default: { failover: [other, de] }
`, z.origin)
	}
	return b.String()
}

// soaSerial returns the serial s serves for origin (0: none).
func soaSerial(s *peertest.Server, origin string) uint32 {
	q := new(dns.Msg)
	q.SetQuestion(origin, dns.TypeSOA)
	r, err := s.Exchange(q, "udp")
	if err != nil || len(r.Answer) != 1 {
		return 0
	}
	if soa, ok := r.Answer[0].(*dns.SOA); ok {
		return soa.Serial
	}
	return 0
}

// axfrFile transfers origin from s (unsigned: the peers allow 127.0.0.1)
// and writes it to a file for dnssec-verify.
func axfrFile(t *testing.T, s *peertest.Server, origin string) (string, int) {
	t.Helper()
	m := new(dns.Msg)
	m.SetAxfr(origin)
	env, err := (&dns.Transfer{DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}).In(m, s.Addr.String())
	if err != nil {
		t.Fatalf("AXFR %s from %s: %v", origin, s.Name, err)
	}
	var b strings.Builder
	n := 0
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR %s from %s: %v", origin, s.Name, e.Error)
		}
		for _, rr := range e.RR {
			b.WriteString(rr.String() + "\n")
			n++
		}
	}
	file := filepath.Join(t.TempDir(), s.Name+"."+origin+"db")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, n
}

// delvQueries are the queries delv must validate in the zone origin as
// text has it: every RRset the zone answers itself (not what is below a
// delegation, which delv would have to follow), the keys' RRsets, the
// steered name; and the denials: a name that does not exist, NODATA at
// a name, at an empty non-terminal, at the steered name, the DS of the
// insecure delegation, and one under the wildcard's parent.
func delvQueries(t *testing.T, origin, text string, nsec3 bool) (pos, neg []validatortest.DelvQuery) {
	for _, q := range validatortest.RRsets(t, origin, text) {
		if strings.HasSuffix(q.Name, "sub."+origin) || strings.HasSuffix(q.Name, "insecure."+origin) {
			if q.Name == "sub."+origin && q.Qtype == dns.TypeDS {
				pos = append(pos, q)
			}
			continue
		}
		pos = append(pos, q)
	}
	pos = append(pos, validatortest.DelvQuery{Name: origin, Qtype: dns.TypeDNSKEY}, validatortest.DelvQuery{Name: origin, Qtype: dns.TypeCDS},
		validatortest.DelvQuery{Name: origin, Qtype: dns.TypeCDNSKEY}, validatortest.DelvQuery{Name: "shop." + origin, Qtype: dns.TypeA})
	if nsec3 {
		pos = append(pos, validatortest.DelvQuery{Name: origin, Qtype: dns.TypeNSEC3PARAM})
	}
	neg = []validatortest.DelvQuery{
		{Name: "nope." + origin, Qtype: dns.TypeA}, {Name: "www." + origin, Qtype: dns.TypeTXT},
		{Name: "ent." + origin, Qtype: dns.TypeA}, {Name: "shop." + origin, Qtype: dns.TypeTXT},
		{Name: "insecure." + origin, Qtype: dns.TypeDS}, {Name: "x.nope.ent." + origin, Qtype: dns.TypeAAAA},
	}
	return pos, neg
}

// TestSignedTransfersOut has Knot, NSD and BIND (one process each,
// serving both variants) transfer steer's signed exports of an NSEC
// zone and an NSEC3 zone over TSIG, then checks what each serves with
// delv (every RRset fully validated, denials validated) and what each
// transferred with dnssec-verify; then the zones change and steer
// notifies: each serves the new serial, Knot and BIND having taken it by
// IXFR, and the changed names validate.
func TestSignedTransfersOut(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"delv", "dnssec-verify"} {
		dnstest.NeedTool(t, tool)
	}
	dir := t.TempDir()
	keys := map[string]string{}
	anchors := map[string]validatortest.Anchor{}
	files := map[string]string{}
	for _, z := range signedXfrZones {
		base, dk := writeKey(t, dir, z.origin, true)
		keys[z.origin] = base
		anchors[z.origin] = validatortest.NewAnchor(t, z.origin, []dns.RR{dk})
		files[z.denial+".zone"] = signedXfrZone(z.origin, 1, "")
	}
	sx := newSignerXfr(t, dir) // zones signed elsewhere, to NSD and Knot
	files["steer.yaml"] = sx.config(signedXfrConfig(keys, nil), nil)
	for k := range xfrKeys {
		files[strings.TrimSuffix(k, "-key")+".key"] = keyFile(k)
	}
	for name, body := range files {
		writeFile(t, dir, name, body)
	}
	n := startNodeIn(t, dir, Options{})
	host, port := n.dns.Addr().String(), n.dns.Port()

	// The three peers, started at once.
	pdir := t.TempDir()
	var peers [3]*peertest.Server
	var wg sync.WaitGroup
	wg.Go(func() {
		var zs []peertest.Zone
		var zone strings.Builder
		for _, z := range signedXfrZones {
			zs = append(zs, peertest.Zone{Origin: z.origin, File: filepath.Join(pdir, "absent."+z.denial)})
		}
		zs = append(zs, sx.peerZones(pdir, "absent")...)
		zone.WriteString(fmt.Sprintf("request-xfr: %s@%d nsd-key\nallow-notify: 127.0.0.1 nsd-key\nprovide-xfr: 127.0.0.1 NOKEY\n", host, port))
		peers[0] = peertest.StartNSD(t, zs, peertest.Options{
			Server: "xfrd-reload-timeout: 0\n",
			Top:    fmt.Sprintf("key:\n  name: nsd-key\n  algorithm: hmac-sha256\n  secret: %q\n", xfrKeys["nsd-key"]),
			Zone:   zone.String(),
		})
	})
	wg.Go(func() {
		var zs []peertest.Zone
		for _, z := range signedXfrZones {
			zs = append(zs, peertest.Zone{Origin: z.origin, File: filepath.Join(pdir, "knot."+z.denial)})
		}
		zs = append(zs, sx.peerZones(pdir, "knot")...)
		peers[1] = peertest.StartKnot(t, zs, peertest.Options{
			Top: fmt.Sprintf(`key:
  - id: knot-key
    algorithm: hmac-sha256
    secret: %s
remote:
  - id: steer
    address: %s@%d
    key: knot-key
acl:
  - id: notify
    address: 127.0.0.1
    key: knot-key
    action: notify
  - id: xfrout
    address: 127.0.0.1
    action: transfer
`, xfrKeys["knot-key"], host, port),
			Zone: "master: steer\nacl: [notify, xfrout]\nzonefile-load: none\njournal-content: changes\n",
		})
	})
	wg.Go(func() {
		dummy := filepath.Join(pdir, "dummy.zone")
		if err := os.WriteFile(dummy, []byte("dummy.test. 60 IN SOA ns.dummy.test. h.dummy.test. 1 60 60 600 60\ndummy.test. 60 IN NS ns.dummy.test.\nns.dummy.test. 60 IN A 192.0.2.1\n"), 0o644); err != nil {
			t.Error(err)
			return
		}
		var top strings.Builder
		fmt.Fprintf(&top, "key \"bind-key\" { algorithm hmac-sha256; secret %q; };\n", xfrKeys["bind-key"])
		for _, z := range signedXfrZones {
			fmt.Fprintf(&top, "zone %q { type secondary; primaries { %s port %d key \"bind-key\"; }; file %q; allow-notify { key \"bind-key\"; }; allow-transfer { 127.0.0.1; }; };\n",
				z.origin, host, port, filepath.Join(pdir, "bind."+z.denial))
		}
		peers[2] = peertest.StartBIND(t, []peertest.Zone{{Origin: "dummy.test.", File: dummy}}, peertest.Options{Top: top.String()})
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, p := range peers {
		for _, z := range signedXfrZones {
			dnstest.WaitFor(t, 20*time.Second, p.Name+" to serve "+z.origin+" serial 1", func() bool { return soaSerial(p, z.origin) == 1 })
		}
	}

	// check has delv validate every query through each peer, and
	// dnssec-verify each peer's copy of each zone.
	// check has delv validate the queries queries gives through each
	// peer, and dnssec-verify each peer's copy of each zone.
	type queriesFunc func(origin string, nsec3 bool) (pos, neg []validatortest.DelvQuery)
	check := func(what string, queries queriesFunc, shop string) {
		t.Helper()
		var jobs []validatortest.DelvJob
		var negative []bool
		var via []string
		for _, p := range peers {
			for _, z := range signedXfrZones {
				d := validatortest.NewDelv(t, p.Addr, anchors[z.origin])
				pos, neg := queries(z.origin, z.denial == "nsec3")
				for _, q := range pos {
					jobs = append(jobs, validatortest.DelvJob{Delv: d, Query: q})
					negative, via = append(negative, false), append(via, p.Name)
				}
				for _, q := range neg {
					jobs = append(jobs, validatortest.DelvJob{Delv: d, Query: q})
					negative, via = append(negative, true), append(via, p.Name)
				}
			}
		}
		start := time.Now()
		res := validatortest.RunDelv(jobs)
		bad := 0
		for i, r := range res {
			if strings.HasPrefix(r.Name, "shop.") && r.Qtype == dns.TypeA {
				if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != shop {
					t.Errorf("%s: via %s: shop: %v, want the fallback %s", what, via[i], r.Answer, shop)
				}
			}
			ok := r.Validated && !negative[i] || r.Negative && negative[i]
			if !ok {
				bad++
				if bad <= 5 {
					t.Errorf("%s: via %s: want %s:\n%v", what, via[i], map[bool]string{false: "fully validated", true: "negative response, fully validated"}[negative[i]], r)
				}
			}
		}
		t.Logf("%s: delv: %d queries through 3 peers, %d not validated, %v", what, len(res), bad, time.Since(start).Round(time.Millisecond))
		for _, p := range peers {
			for _, z := range signedXfrZones {
				file, records := axfrFile(t, p, z.origin)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				// -z: the key is a CSK, not a KSK alone.
				out, err := exec.CommandContext(ctx, "dnssec-verify", "-z", "-o", z.origin, file).CombinedOutput()
				cancel()
				if err != nil || !strings.Contains(string(out), "Zone fully signed") {
					t.Errorf("%s: dnssec-verify of %s's %s (%d records): %v\n%s", what, p.Name, z.origin, records, err, out)
				}
			}
		}
	}
	// Every RRset and the denials, at serial 1.
	check("serial 1", func(origin string, nsec3 bool) (pos, neg []validatortest.DelvQuery) {
		return delvQueries(t, origin, signedXfrZone(origin, 1, ""), nsec3)
	}, "198.51.100.2")
	for _, o := range signerXfrOrigins {
		sx.wait(peers[:2], o, 1)
	}
	sx.check("signed elsewhere, serial 1", n, peers[:2], "198.51.100.2", 1)

	// A change in the file (a new name: its RRset and two NSEC or NSEC3
	// records signed), with NOTIFYs to each peer; then the steered
	// name's fallback moves (its default pool drained): a new serial
	// without a file change, the fallback signed again.
	notify := map[string]int{"nsd-key": int(peers[0].Addr.Port()), "knot-key": int(peers[1].Addr.Port()), "bind-key": int(peers[2].Addr.Port())}
	writeFile(t, dir, "steer.yaml", sx.config(signedXfrConfig(keys, notify), notify))
	sx.sign(preOrigin, 2, "added TXT \"new in serial 2\"\n") // the signer signs a change
	for _, z := range signedXfrZones {
		writeFile(t, dir, z.denial+".zone", signedXfrZone(z.origin, 2, "added TXT \"new in serial 2\"\n"))
	}
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitAll := func(serial uint32, d time.Duration) {
		start := time.Now()
		for _, p := range peers {
			for _, z := range signedXfrZones {
				dnstest.WaitFor(t, d, fmt.Sprintf("%s to serve %s serial %d", p.Name, z.origin, serial), func() bool { return soaSerial(p, z.origin) == serial })
			}
		}
		t.Logf("serial %d served by the three peers %v after the change", serial, time.Since(start).Round(time.Millisecond))
	}
	waitAll(2, 45*time.Second)
	for _, z := range signedXfrZones {
		if code, body := n.call("PUT", "/v1/records/shop."+z.origin+"/pools/other/state", "", `{"state":"down"}`); code != 204 {
			t.Fatalf("pool override: %d %s", code, body)
		}
	}
	// The multi-signer zone's fallback moves too, but its SOA is its
	// signer's: its export stays that of serial 1 (below).
	if code, body := n.call("PUT", "/v1/records/shop."+multiOrigin+"/pools/other/state", "", `{"state":"down"}`); code != 204 {
		t.Fatalf("pool override: %d %s", code, body)
	}
	waitAll(3, 45*time.Second)
	sx.wait(peers[:2], preOrigin, 2)
	// What the changes touched, at serial 3 (the copies are checked
	// whole by dnssec-verify): the SOA, the new name, the names around
	// it (in the NSEC chain: alias before it, ent after it), the
	// fallback; a name in the new gap, NODATA at the new name.
	check("serial 3", func(origin string, nsec3 bool) (pos, neg []validatortest.DelvQuery) {
		pos = []validatortest.DelvQuery{{Name: origin, Qtype: dns.TypeSOA}, {Name: "added." + origin, Qtype: dns.TypeTXT},
			{Name: "alias." + origin, Qtype: dns.TypeCNAME}, {Name: "deep.ent." + origin, Qtype: dns.TypeTXT}, {Name: "shop." + origin, Qtype: dns.TypeA}}
		neg = []validatortest.DelvQuery{{Name: "addee." + origin, Qtype: dns.TypeA}, {Name: "added." + origin, Qtype: dns.TypeA}}
		return pos, neg
	}, "198.51.100.1")
	sx.check("signed elsewhere, after the changes", n, peers[:2], "198.51.100.2", 2)
	logs := n.logs.String()
	if !hasLine(logs, "zone transferred out", "zone="+preOrigin, "type=ixfr", "serial=2", "form=incremental", "key=knot-key") {
		t.Errorf("%s: no incremental transfer of serial 2 to Knot:\n%s", preOrigin, grepLines(logs, "zone="+preOrigin))
	}
	if l := grepLines(logs, "expire before the signer's own"); l != "" {
		t.Errorf("steer's signatures in the multi-signer export, valid 60 days, said to expire before the signer's 30:\n%s", l)
	}
	if l := grepLines(logs, "giving it the next one"); strings.Contains(l, multiOrigin) || strings.Contains(l, preOrigin) {
		t.Errorf("a zone signed elsewhere was given a serial of steer's:\n%s", l)
	}
	for _, z := range signedXfrZones {
		for _, k := range []string{"knot-key", "bind-key"} {
			for _, serial := range []string{"serial=2", "serial=3"} {
				if !hasLine(logs, "zone transferred out", "zone="+z.origin, "type=ixfr", serial, "form=incremental", "key="+k) {
					t.Errorf("%s: no incremental transfer of %s to the peer with %s", z.origin, serial, k)
				}
			}
		}
	}
	t.Logf("steer's transfers:\n%s", grepLines(logs, "transferred out"))
}

// hasLine reports whether text has a line with all of words.
func hasLine(text string, words ...string) bool {
	for _, l := range strings.Split(text, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestSignedExportRenewal: signatures falling due (a validity of
// seconds) change what a signed zone exports, so the export gets the
// next serial though the file's is the same, and an IXFR from the first
// serial carries the old RRSIGs out and the new ones in; the export
// after the renewal is still whole (dnssec-verify).
func TestSignedExportRenewal(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "dnssec-verify")
	const origin = "renew.xfr.test."
	dir := t.TempDir()
	base, dk := writeKey(t, dir, origin, true)
	writeFile(t, dir, "renew.zone", signedXfrZone(origin, 1, ""))
	writeFile(t, dir, "knot.key", keyFile("knot-key"))
	// Validity 20 s, renewed at 30 %: a signature falls due about 4 s
	// after it is made.
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(`api: { listen: "127.0.0.1:0" }
health: { state_file: state/steer-health.json }
tsig:
  knot-key: { secret_file: knot.key }
zones:
  - origin: %s
    file: renew.zone
    dnssec: { keys: [%s], validity: 20s, refresh: 0.3, denial: nsec3 }
    secondaries:
      - { address: 127.0.0.1, tsig: knot-key, notify: none }
records:
  - name: shop.%s
    ttl: 30
    pools:
      other: { address: 198.51.100.2 }
    rules:
      - default: { pool: other }
`, origin, base, origin))
	n := startNodeIn(t, dir, Options{})
	serial := func() uint32 {
		r, err := n.tryQuery(origin, dns.TypeSOA)
		if err != nil || len(r.Answer) != 1 {
			return 0
		}
		return r.Answer[0].(*dns.SOA).Serial
	}
	first := serial()
	if first == 0 {
		t.Fatal("no SOA")
	}
	start := time.Now()
	// Both the served SOA and the transfer service's export (which the
	// IXFR below is answered from, and which follows the snapshot a
	// moment later under load) must have moved on.
	dnstest.WaitFor(t, 30*time.Second, "a renewal to give the export a new serial", func() bool {
		return xfrSerialNewer(serial(), first) && xfrSerialNewer(n.xfr.Status(origin).ExportedSerial, first)
	},
		func() string { return grepLines(n.logs.String(), "renew") })
	t.Logf("serial %d → %d after %v", first, serial(), time.Since(start).Round(time.Millisecond))

	tr := &dns.Transfer{TsigSecret: map[string]string{"knot-key.": xfrKeys["knot-key"]}, DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetIxfr(origin, first, ".", ".")
	m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
	env, err := tr.In(m, n.dns.String())
	if err != nil {
		t.Fatal(err)
	}
	var rrs []dns.RR
	for e := range env {
		if e.Error != nil {
			t.Fatalf("IXFR: %v", e.Error)
		}
		rrs = append(rrs, e.RR...)
	}
	if len(rrs) < 3 || rrs[1].Header().Rrtype != dns.TypeSOA || rrs[1].(*dns.SOA).Serial != first {
		t.Fatalf("IXFR from %d is not incremental: %d records, the second %v", first, len(rrs), rrs[min(1, len(rrs)-1)])
	}
	// Walk the difference sequences: deletions after a From SOA,
	// additions after a To SOA.
	var del, add []*dns.RRSIG
	adding, soas := false, 0
	for _, rr := range rrs[1 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			soas++
			adding = soas%2 == 0
			continue
		}
		if sig, ok := rr.(*dns.RRSIG); ok {
			if adding {
				add = append(add, sig)
			} else {
				del = append(del, sig)
			}
		}
	}
	if len(del) == 0 || len(add) == 0 {
		t.Fatalf("IXFR from %d: %d RRSIGs out, %d in", first, len(del), len(add))
	}
	now := uint32(time.Now().Unix())
	for _, s := range add {
		if s.KeyTag != dk.KeyTag() || s.Inception > now || s.Expiration < now {
			t.Errorf("an RRSIG the IXFR adds is not a current one of the key: %v", s)
		}
	}
	t.Logf("IXFR %d → %d: %d RRSIGs out, %d in, %d deltas", first, rrs[0].(*dns.SOA).Serial, len(del), len(add), soas/2)

	// AXFR now: whole.
	m = new(dns.Msg)
	m.SetAxfr(origin)
	m.SetTsig("knot-key.", dns.HmacSHA256, 300, time.Now().Unix())
	tr = &dns.Transfer{TsigSecret: tr.TsigSecret, DialTimeout: 3 * time.Second, ReadTimeout: 5 * time.Second}
	env, err = tr.In(m, n.dns.String())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for e := range env {
		if e.Error != nil {
			t.Fatalf("AXFR: %v", e.Error)
		}
		for _, rr := range e.RR {
			b.WriteString(rr.String() + "\n")
		}
	}
	file := filepath.Join(t.TempDir(), "renew.db")
	writeFile(t, filepath.Dir(file), "renew.db", b.String())
	if out, err := exec.Command("dnssec-verify", "-z", "-o", origin, file).CombinedOutput(); err != nil {
		t.Errorf("dnssec-verify after the renewal: %v\n%s", err, out)
	}
}

// xfrSerialNewer is RFC 1982's a after b.
func xfrSerialNewer(a, b uint32) bool { return a != b && a-b < 1<<31 }
