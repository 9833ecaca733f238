package fleetnode

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/fleet"
)

// signedBundle is a pushed configuration with a signed zone whose CSK
// travels in the bundle, a TSIG key and a cookie secret; it returns the
// key's base name in the bundle.
func signedBundle(t *testing.T) (fleet.Bundle, string) {
	t.Helper()
	k, err := dnssec.GenerateKey("example.com", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := k.Files(time.Now())
	base := "keys/" + k.BaseName()
	return fleet.Bundle{Rev: 3, Meta: fleet.Meta{Serial: 3}, Files: map[string][]byte{
		"steer.yaml": []byte(`identity: pushed
cookies: { secret_file: cookie.key }
tsig:
  xfr: { secret_file: xfr.key }
zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [` + base + `] }
`),
		"example.com.zone": []byte("$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 60\n@ NS ns1\nns1 A 192.0.2.53\n"),
		base + ".key":      pub,
		base + ".private":  priv,
		"cookie.key":       []byte("8c1f4a0e2d7b93c65e0a17f2b4d8c391\n"),
		"xfr.key":          []byte("key \"xfr\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlYw==\";\n};\n"),
	}}, base
}

// TestBundleKeys: Secrets names the bundle's private key, TSIG key and
// cookie secret (and no zone or public key); a bundle with key files no
// zone names (a key for a zone not pushed) is not served, naming them;
// and the bundle kept on disk is readable by the node's user only, even
// over a temporary file left with another mode.
func TestBundleKeys(t *testing.T) {
	b, base := signedBundle(t)
	want := map[string]string{base + ".private": config.SecretDNSSEC, "xfr.key": config.SecretTSIG, "cookie.key": config.SecretCookie}
	if got := Secrets(b); !maps.Equal(got, want) {
		t.Errorf("Secrets: %v, want %v", got, want)
	}
	if got := HasPrivateKeys(Secrets(b)); len(got) != 1 || got[0] != base+".private" {
		t.Errorf("HasPrivateKeys: %v", got)
	}

	local, err := config.Parse(nil, "local.yaml", []byte(fleetLocal([]string{"http://127.0.0.1:1"}, "fra-1")))
	if err != nil {
		t.Fatal(err)
	}
	m := &Member{local: local, latest: b}
	if _, _, err := m.Config(nil); err != nil {
		t.Fatalf("the signed bundle: %v", err)
	}
	other, err := dnssec.GenerateKey("example.org", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv := other.Files(time.Now())
	for name, files := range map[string]map[string][]byte{
		"a pair for a zone not pushed":         {"keys/" + other.BaseName() + ".key": pub, "keys/" + other.BaseName() + ".private": priv},
		"a private key under another name":     {"notes.txt": priv},
		"a public key of dnssec-keygen's name": {"K" + "example.org.+013+00001.key": pub},
	} {
		stray := fleet.Bundle{Rev: 4, Meta: fleet.Meta{Serial: 4}, Files: maps.Clone(b.Files)}
		maps.Copy(stray.Files, files)
		m.latest = stray
		_, _, err := m.Config(nil)
		if err == nil {
			t.Errorf("%s: served", name)
			continue
		}
		for f := range files {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: %v does not name %s", name, err, f)
			}
		}
		if !strings.Contains(err.Error(), "fleet bundle serial 4 (revision 4): ") || !strings.Contains(err.Error(), "no zone's dnssec.keys names (keys for a zone not pushed?)") {
			t.Errorf("%s: %v", name, err)
		}
		if strings.Contains(err.Error(), strings.Fields(string(priv))[5]) {
			t.Errorf("%s: the error shows the private key: %v", name, err)
		}
	}

	dir := t.TempDir()
	m.cache = filepath.Join(dir, BundleCache)
	m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := os.WriteFile(m.cache+".tmp", []byte("left by an earlier run"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.saveCache(b)
	st, err := os.Stat(m.cache)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the kept bundle: %v, %v; want mode 0600", st.Mode(), err)
	}
	if _, err := os.Stat(m.cache + ".tmp"); err == nil {
		t.Error("the temporary file is left")
	}
	kept, err := m.loadCache()
	if err != nil || string(kept.Files[base+".private"]) != string(b.Files[base+".private"]) {
		t.Errorf("the kept bundle reads back as %v, %v", kept.Files, err)
	}
}
