package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
)

const apiBase = "zones: [{ origin: example.com, file: com.zone }]\n"

func TestAPIUIPublic(t *testing.T) {
	c := mustParse(t, apiBase+"api: { listen: 127.0.0.1:8053, ui_public: true }\n")
	if !c.API.UIPublic {
		t.Error("api.ui_public not read")
	}
	if c := mustParse(t, apiBase+"api: { listen: 127.0.0.1:8053 }\n"); c.API.UIPublic {
		t.Error("api.ui_public on by default")
	}
	_, ps := parse(t, apiBase+"api:\n  ui_public: true\n")
	checkProblems(t, ps, []prob{{3, "api.ui_public without api.listen"}})
	_, ps = parse(t, apiBase+"api:\n  listen: 127.0.0.1:8053\n  ui_public: maybe\n")
	if len(ps) != 1 || ps[0].Line != 4 {
		t.Errorf("ui_public: maybe: want one problem at line 4, got %v", ps)
	}
}

// writeCert writes a self-signed certificate and its key into dir.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "api.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "api.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

func TestAPITLS(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	os.WriteFile(filepath.Join(dir, "other.key"), []byte("not a key"), 0o600)
	file := filepath.Join(dir, "steer.yaml")
	load := func(api string) (*config.Config, diag.Problems) {
		t.Helper()
		c, err := config.Parse(nil, file, []byte(apiBase+api))
		var ps diag.Problems
		if err != nil && !errors.As(err, &ps) {
			t.Fatalf("%T %v", err, err)
		}
		return c, ps
	}
	c, ps := load("api:\n  listen: 127.0.0.1:8053\n  tls_cert_file: api.crt\n  tls_key_file: api.key\n")
	if ps != nil || c.API.TLSCert == nil || len(c.API.TLSCert.Certificate) != 1 {
		t.Fatalf("a good pair: %v", ps)
	}
	for _, tc := range []struct {
		api  string
		line int
		msg  string
	}{
		{"api:\n  listen: 127.0.0.1:8053\n  tls_cert_file: api.crt\n", 4, "api.tls_cert_file without api.tls_key_file"},
		{"api:\n  listen: 127.0.0.1:8053\n  tls_key_file: api.key\n", 4, "api.tls_key_file without api.tls_cert_file"},
		{"api:\n  listen: 127.0.0.1:8053\n  tls_cert_file: api.crt\n  tls_key_file: other.key\n", 4, "api.tls_cert_file: api.crt and other.key"},
		{"api:\n  listen: 127.0.0.1:8053\n  tls_cert_file: nosuch.crt\n  tls_key_file: api.key\n", 4, "nosuch.crt"},
		{"api:\n  listen: 127.0.0.1:8053\n  tls_cert_file: api.crt\n  tls_key_file: nosuch.key\n", 5, "nosuch.key"},
		{"api:\n  tls_cert_file: api.crt\n  tls_key_file: api.key\n", 3, "api.tls_cert_file without api.listen"},
	} {
		_, ps := load(tc.api)
		found := false
		for _, p := range ps {
			found = found || p.File == file && p.Line == tc.line && strings.Contains(p.Msg, tc.msg)
		}
		if !found {
			t.Errorf("%q: want %s:%d %q, got %v", tc.api, file, tc.line, tc.msg, ps)
		}
	}
}

// TestAPITLSReread: a reload of an unchanged file reads a renewed
// certificate.
func TestAPITLSReread(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	file := filepath.Join(dir, "steer.yaml")
	os.WriteFile(file, []byte(apiBase+"api: { listen: 127.0.0.1:8053, tls_cert_file: api.crt, tls_key_file: api.key }\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "com.zone"), []byte("$ORIGIN example.com.\n@ 300 SOA ns hm 1 2 3 4 5\n@ 300 NS ns\nns 300 A 192.0.2.1\n"), 0o600)
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if again, same, err := config.LoadAgain(nil, file, c); err != nil || !same || again != c {
		t.Fatalf("unchanged: same %v, err %v", same, err)
	}
	writeCert(t, dir)
	again, same, err := config.LoadAgain(nil, file, c)
	if err != nil || same || again.API.TLSCert == nil || string(again.API.TLSCert.Certificate[0]) == string(c.API.TLSCert.Certificate[0]) {
		t.Fatalf("renewed: same %v, err %v", same, err)
	}
}
