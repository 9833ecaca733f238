package uitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"
)

// TestLoginCookieOverTLS: with the admin API on HTTPS (api.tls_cert_file,
// api.tls_key_file), the login's cookie is also Secure, besides HttpOnly
// and SameSite=Strict.
func TestLoginCookieOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	write(t, filepath.Join(dir, "api.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, filepath.Join(dir, "api.key"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	write(t, filepath.Join(dir, "token"), token+"\n")
	write(t, filepath.Join(dir, "zones/example.com.zone"), zone(t))
	ports := freePorts(t, 2)
	api := fmt.Sprintf("127.0.0.1:%d", ports[1])
	config := write(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
api: { listen: %q, token_file: token, tls_cert_file: api.crt, tls_key_file: api.key }
zones:
  - origin: example.com
    file: zones/example.com.zone
records:
  - name: shop.example.com
    ttl: 2
    pools:
      a: { address: 192.0.2.1 }
    rules:
      - default: { pool: a }
`, ports[0], api))
	startSteer(t, config)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Timeout: 5 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm("https://"+api+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 303 || len(res.Cookies()) == 0 {
		t.Fatalf("login over TLS: %d with %d cookies, want 303 and the cookie", res.StatusCode, len(res.Cookies()))
	}
	for _, ck := range res.Cookies() {
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s over TLS: Secure %v HttpOnly %v SameSite %v, want all three", ck.Name, ck.Secure, ck.HttpOnly, ck.SameSite)
		}
	}
}
