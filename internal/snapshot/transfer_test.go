package snapshot_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/snapshot"
)

const xfrKey = `key "xfr-key" {
	algorithm hmac-sha256;
	secret "c3RlZXIgeGZyIHRlc3Qga2V5IDMyIGJ5dGVzIGxvbmcu";
};
`

func exportStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

// A steered name is exported as its fallback: the default rule's pool,
// with the record's TTL; the export starts and ends with the SOA.
func TestExportFallback(t *testing.T) {
	cfg, dir := write(t, map[string]string{
		"steer.yaml": strings.Replace(degradedConfig, "    file: com.zone\n", "    file: com.zone\n    secondaries:\n      - { address: 127.0.0.2, tsig: xfr-key }\n", 1) +
			"tsig:\n  xfr-key: { secret_file: xfr.key }\n",
		"com.zone": comZone, "lab.zone": labZone, "org.zone": orgZone, "xfr.key": xfrKey,
	})
	writeGeo(t, filepath.Join(dir, "geo.mmdb"), "DE")
	snap, warns, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(warns), "zone example.com. has 1 steered name(s) and is transferred out") {
		t.Errorf("no warning about steering and transfers:\n%v", warns)
	}
	rrs := snap.Export("example.com.")
	got := exportStrings(rrs)
	if len(got) < 3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("export %v", got)
	}
	if !slices.Contains(got, "shop.example.com.\t60\tIN\tA\t10.0.0.2") || slices.Contains(got, "shop.example.com.\t60\tIN\tA\t10.0.0.1") {
		t.Errorf("steered name not exported as the default pool:\n%s", strings.Join(got, "\n"))
	}
	if k, ok := snap.Key("xfr-key"); !ok || k.Name != "xfr-key." || k.Algorithm != dns.HmacSHA256 {
		t.Errorf("key %+v %v", k, ok)
	}
	if snap.Export("nowhere.example.") != nil {
		t.Error("export of an unserved zone")
	}
}

func TestTSIGKeyProblems(t *testing.T) {
	for _, c := range []struct{ file, alg, want string }{
		{"", "", "no such file"},
		{xfrKey, "hmac-sha512", "algorithm hmac-sha512 here but hmac-sha256 in"},
		{strings.Replace(xfrKey, `"xfr-key"`, `"other"`, 1), "", `holds no key named "xfr-key" (it has other)`},
		{strings.Replace(xfrKey, "c3RlZXIg", "c3", 1), "", "not base64"},
		{xfrKey, "hmac-md5", "HMAC-MD5"},
	} {
		files := map[string]string{"steer.yaml": "zones:\n  - origin: example.org\n    file: org.zone\ntsig:\n  xfr-key: { secret_file: xfr.key" + map[bool]string{true: ", algorithm: " + c.alg}[c.alg != ""] + " }\n", "org.zone": orgZone}
		if c.file != "" {
			files["xfr.key"] = c.file
		}
		cfg, _ := write(t, files)
		_, _, err := snapshot.Build(cfg)
		if err == nil || !strings.Contains(err.Error(), "steer.yaml:5: tsig: xfr-key: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want steer.yaml:5 and %q", c.want, err, c.want)
		}
	}
}

// A secondary zone is served from what Options.Secondary gives, SERVFAIL
// while there is none; a serial from Options.Serials newer than the
// copy's is what it answers with.
func TestSecondaryAndSerials(t *testing.T) {
	cfg, _ := write(t, map[string]string{
		"steer.yaml": "zones:\n  - origin: example.org\n    primaries: [127.0.0.1:5300]\n",
	})
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if z := snap.Zones.Zone("example.org."); z == nil || z.Failed != "not transferred yet" {
		t.Fatalf("check build: %v", z)
	}
	var tr snapshot.Transferred
	opts := snapshot.Options{Secondary: func(string) snapshot.Transferred { return tr }}
	tr = snapshot.Transferred{Name: "transferred", Unusable: "expired"}
	snap, warns, err := snapshot.BuildWith(cfg, opts)
	if err != nil || len(snap.Degraded) != 1 || !strings.Contains(fmt.Sprint(warns), "no copy to serve (expired)") {
		t.Fatalf("no copy: %v %v %v", err, snap.Degraded, warns)
	}
	if rc, _ := ask(t, snap, "www.example.org.", dns.TypeA); rc != "SERVFAIL" {
		t.Errorf("no copy answered %s", rc)
	}
	tr = snapshot.Transferred{Name: "transferred", Data: []byte(orgZone)}
	opts.Previous = snap
	snap, _, err = snapshot.BuildWith(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rc, ans := ask(t, snap, "www.example.org.", dns.TypeA); rc != "NOERROR" || len(ans) != 1 {
		t.Errorf("copy answered %s %v", rc, ans)
	}
	opts.Previous = snap
	opts.Serials = map[string]uint32{"example.org.": 5}
	snap, _, err = snapshot.BuildWith(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	z := snap.Zones.Zone("example.org.")
	if z.Serial() != 5 || z.FileSerial() != 1 || snap.Export("example.org.")[0].(*dns.SOA).Serial != 5 {
		t.Errorf("serial %d file serial %d", z.Serial(), z.FileSerial())
	}
	opts.Previous = snap
	tr.Data = []byte(strings.Replace(orgZone, "hostmaster 1 ", "hostmaster 9 ", 1))
	snap, _, _ = snapshot.BuildWith(cfg, opts)
	if z := snap.Zones.Zone("example.org."); z.Serial() != 9 {
		t.Errorf("a newer file serial must win: %d", z.Serial())
	}
}

// TestSourceNotOnHost: a transfer_source this host does not have is a
// warning at its line (sending from it would fail); a loopback one is
// not.
func TestSourceNotOnHost(t *testing.T) {
	cfg, _ := write(t, map[string]string{
		"steer.yaml": "listen: [\"127.0.0.1:0\"]\ntransfers:\n  transfer_source: 192.0.2.77\n  notify_source: 127.0.0.2\n",
	})
	_, warns, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := fmt.Sprint(warns)
	if !strings.Contains(w, "steer.yaml:3: transfers.transfer_source: 192.0.2.77 is not an address of this host") {
		t.Errorf("no warning for transfer_source:\n%v", warns)
	}
	if strings.Contains(w, "notify_source") {
		t.Errorf("a loopback notify_source warned:\n%v", warns)
	}
}
