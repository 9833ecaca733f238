package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// TestDSCheckOffline: steer dnssec ds-check against NSD serving the
// parent zone example.com, with the keys of the configuration (no node
// runs): a delegation whose DS (SHA-384) names the zone's KSK passes; one
// with a DS beside it that matches no published KSK fails naming that DS;
// one with no DS fails naming the KSK and its DS; a name the parent does
// not delegate fails saying so.
func TestDSCheckOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := map[string]*dnssec.Key{}
	var cfg, parent strings.Builder
	parent.WriteString("$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.1\n")
	cfg.WriteString("zones:\n")
	files := map[string]string{}
	for _, child := range []string{"ok", "stray", "missing"} {
		origin := child + ".example.com."
		ksk, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, true)
		noErr(t, err)
		zsk, err := dnssec.GenerateKey(origin, dns.ECDSAP256SHA256, false)
		noErr(t, err)
		keys[child] = ksk
		var bases []string
		for _, k := range []*dnssec.Key{ksk, zsk} {
			b, err := dnssec.WriteKey(filepath.Join(dir, "keys"), k, time.Now())
			noErr(t, err)
			bases = append(bases, b)
		}
		files[child+".zone"] = "$TTL 300\n@ SOA ns.example.com. hostmaster 1 3600 600 86400 300\n@ NS ns.example.com.\n"
		fmt.Fprintf(&cfg, "  - origin: %s\n    file: %s.zone\n    dnssec: { keys: [%s, %s] }\n", origin, child, bases[0], bases[1])
		fmt.Fprintf(&parent, "%s NS ns.example.com.\n", child)
		if child != "missing" {
			ds := ksk.DNSKEY.ToDS(dns.SHA384)
			fmt.Fprintf(&parent, "%s DS %d %d %d %s\n", child, ds.KeyTag, ds.Algorithm, ds.DigestType, ds.Digest)
		}
		if child == "stray" {
			fmt.Fprintf(&parent, "%s DS 4711 13 2 %s\n", child, strings.Repeat("AB", 32))
		}
	}
	files["steer.yaml"] = cfg.String()
	files["example.com.zone"] = parent.String()
	dnstest.WriteFiles(t, dir, files)
	nsd := peertest.StartNSD(t, []peertest.Zone{{Origin: "example.com.", File: filepath.Join(dir, "example.com.zone")}}, peertest.Options{})
	conf := filepath.Join(dir, "steer.yaml")
	check := func(zone string, args ...string) (int, string, string) {
		return runSteer(append([]string{"dnssec", "ds-check", zone, "--config", conf, "--parent-ns", nsd.Addr.String()}, args...)...)
	}
	code, out, errOut := check("ok.example.com")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("ok       ok.example.com. IN DS %d 13 4 ", keys["ok"].Tag)) ||
		!strings.Contains(out, "(SHA-384) -> KSK") || !strings.Contains(out, "OFFLINE") {
		t.Fatalf("ok: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = check("stray.example.com", "--tcp")
	if want := "DS stray.example.com. IN DS 4711 13 2 " + strings.Repeat("AB", 32) + " matches no published KSK"; code != 1 || !strings.Contains(errOut, want) || !strings.Contains(out, "(TCP)") {
		t.Fatalf("stray: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = check("missing.example.com", "--json")
	if want := fmt.Sprintf("KSK %d has no DS at the parent", keys["missing"].Tag); code != 1 || !strings.Contains(errOut, want) ||
		!strings.Contains(out, `"ok": false`) || !strings.Contains(out, dnssec.DSLine(keys["missing"].DS())) {
		t.Fatalf("missing: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	if code, _, errOut := check("nope.example.com"); code != 1 || !strings.Contains(errOut, "serves no zone nope.example.com.") {
		t.Errorf("a zone not configured: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{
		{"dnssec", "ds-check", "ok.example.com", "--config", conf},
		{"dnssec", "ds-check", "ok.example.com", "--parent-ns", "127.0.0.1:99999"},
		{"dnssec", "ds-check", "ok.example.com", "--parent-ns", "127.0.0.1", "--dir", "x"},
		{"dnssec", "roll-ksk", "ok.example.com", "--parent-ns", "127.0.0.1"},
		{"dnssec", "roll-ksk", "ok.example.com", "--complete"},
		{"dnssec", "status", "ok.example.com", "--tcp"},
	} {
		if code, _, errOut := runSteer(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	if code, _, errOut := runSteer("dnssec", "status", "ok.example.com", "--config", conf); code != 1 || !strings.Contains(errOut, "give --api URL") {
		t.Errorf("status without a node's API: exit %d %s", code, errOut)
	}
}

// TestDNSSECRollCommands: steer dnssec status, roll-ksk and ds-check
// against a running steer (its API found through --config) and NSD
// serving the parent zone com. with the old KSK's DS: status lists the
// KSK and ZSK; roll-ksk prints the new DS; ds-check then fails naming
// the new KSK the parent lacks; completing is refused naming the
// parent's DS; status --json shows the rollover under way.
func TestDNSSECRollCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var bases []string
	var ksk *dnssec.Key
	for _, sep := range []bool{true, false} {
		k, err := dnssec.GenerateKey("example.com", dns.ECDSAP256SHA256, sep)
		noErr(t, err)
		b, err := dnssec.WriteKey(filepath.Join(dir, "keys"), k, time.Now())
		noErr(t, err)
		bases = append(bases, b)
		if sep {
			ksk = k
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	old := ksk.DS()
	dnstest.WriteFiles(t, dir, map[string]string{
		"token":            "tok",
		"example.com.zone": zoneText(1, "x"),
		"com.zone": "$ORIGIN com.\n$TTL 300\n@ SOA ns.nic hostmaster 1 3600 600 86400 300\n@ NS ns.nic\nns.nic A 192.0.2.1\nexample NS ns1.example\nns1.example A 192.0.2.53\n" +
			fmt.Sprintf("example 60 DS %d %d %d %s\n", old.KeyTag, old.Algorithm, old.DigestType, old.Digest),
		"steer.yaml": fmt.Sprintf("listen: [%q]\napi: { listen: %q, token_file: token }\nzones:\n  - origin: example.com\n    file: example.com.zone\n    dnssec: { keys: [%s, %s] }\n",
			addr, apiAddr, bases[0], bases[1]),
	})
	cfg := filepath.Join(dir, "steer.yaml")
	startSteer(t, cfg)
	nsd := peertest.StartNSD(t, []peertest.Zone{{Origin: "com.", File: filepath.Join(dir, "com.zone")}}, peertest.Options{})

	code, out, errOut := runSteer("dnssec", "status", "example.com", "--config", cfg)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%-6d KSK", ksk.Tag)) || !strings.Contains(out, dnssec.DSLine(old)) || !strings.Contains(out, "state directory") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runSteer("dnssec", "ds-check", "example.com", "--config", cfg, "--parent-ns", nsd.Addr.String()); code != 0 || !strings.Contains(out, "running node's key plan") {
		t.Fatalf("ds-check before the rollover: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runSteer("dnssec", "roll-ksk", "example.com", "--config", cfg)
	if code != 0 || !strings.Contains(out, "give the parent the new DS") || !strings.Contains(out, "KSK rollover under way") {
		t.Fatalf("roll-ksk: exit %d\n%s%s", code, out, errOut)
	}
	var p api.KeyPlan
	code, js, errOut := runSteer("dnssec", "status", "example.com", "--config", cfg, "--json")
	if code != 0 || json.Unmarshal([]byte(js), &p) != nil || p.Rolling == nil || len(p.Keys) != 3 || len(p.ParentDS) != 2 {
		t.Fatalf("status --json: exit %d\n%s%s", code, js, errOut)
	}
	code, out, errOut = runSteer("dnssec", "ds-check", "example.com", "--config", cfg, "--parent-ns", nsd.Addr.String())
	if want := fmt.Sprintf("KSK %d has no DS at the parent", p.Rolling.New); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("ds-check during the rollover: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = runSteer("dnssec", "roll-ksk", "example.com", "--config", cfg, "--complete", "--parent-ns", nsd.Addr.String())
	if want := fmt.Sprintf("has no DS naming the new KSK %d", p.Rolling.New); code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, dnssec.DSLine(old)) {
		t.Fatalf("complete before the parent has the new DS: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	if code, _, errOut := runSteer("dnssec", "status", "exmaple.com", "--config", cfg); code != 1 || !strings.Contains(errOut, "404") || !strings.Contains(errOut, "exmaple.com.") {
		t.Errorf("status of a typo: exit %d %s", code, errOut)
	}
}
