package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
)

// selfSigned returns a PEM certificate and key for 127.0.0.1 with serial.
func selfSigned(t *testing.T, serial int64) (certPEM, keyPEM string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "steer test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), cert
}

// uiClient is a browser's view: a cookie jar, no redirects followed,
// trusting roots.
func uiClient(roots *x509.CertPool) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar: jar, Timeout: 10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type uiResp struct {
	code int
	h    http.Header
	body string
	tls  *tls.ConnectionState
}

func uiDo(t *testing.T, c *http.Client, method, u, body string, hdr ...string) uiResp {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return uiResp{r.StatusCode, r.Header, string(b), r.TLS}
}

func uiLogin(t *testing.T, c *http.Client, base, token string) uiResp {
	return uiDo(t, c, "POST", base+"/ui/login", url.Values{"token": {token}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
}

// The dashboard's shell on a real node over HTTPS: the login form, the
// cookie's flags, the cookie on /v1/ with and without the CSRF token, a
// certificate renewed by a reload, a rotated token ending the session,
// api.ui_public, and TLS turned off by a reload.
func TestDashboardShell(t *testing.T) {
	cfg := func(extra string) string {
		return `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token` + extra + ` }
zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`
	}
	const withTLS = ", tls_cert_file: api.crt, tls_key_file: api.key"
	certPEM, keyPEM, cert1 := selfSigned(t, 1)
	n := startNode(t, map[string]string{
		"steer.yaml": cfg(withTLS), "token": "tok-1", "api.crt": certPEM, "api.key": keyPEM,
		"example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	roots := x509.NewCertPool()
	roots.AddCert(cert1)
	base := "https://" + n.APIAddr()
	c := uiClient(roots)

	r := uiDo(t, c, "GET", base+"/ui/login", "")
	if r.code != 200 || !strings.Contains(r.body, `id="login"`) || strings.Contains(r.body, "shop.example.com") {
		t.Fatalf("GET /ui/login: %d\n%s", r.code, r.body)
	}
	if r.h.Get("Content-Security-Policy") != api.UIHeaders["Content-Security-Policy"] || r.h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("login page headers: %v", r.h)
	}
	if r := uiDo(t, c, "GET", base+"/ui/", ""); r.code != http.StatusForbidden {
		t.Errorf("GET /ui/ without a session: %d", r.code)
	}
	if r := uiLogin(t, c, base, "tok-2"); r.code != http.StatusUnauthorized || len(r.h.Values("Set-Cookie")) > 0 {
		t.Errorf("wrong token: %d %v", r.code, r.h.Values("Set-Cookie"))
	}
	r = uiLogin(t, c, base, "tok-1")
	if r.code != http.StatusSeeOther {
		t.Fatalf("login: %d %s", r.code, r.body)
	}
	sc, err := http.ParseSetCookie(r.h.Get("Set-Cookie"))
	if err != nil || sc.Name != api.SessionCookie || !sc.HttpOnly || !sc.Secure || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/" {
		t.Fatalf("login cookie %q (%v): want %s, HttpOnly, Secure, SameSite=Strict, Path=/", r.h.Get("Set-Cookie"), err, api.SessionCookie)
	}
	if r := uiDo(t, c, "GET", base+"/v1/status", ""); r.code != 200 || !strings.Contains(r.body, "shop.example.com.") {
		t.Fatalf("GET /v1/status with the cookie: %d %s", r.code, r.body)
	}
	if r := uiDo(t, c, "GET", base+"/ui/", ""); r.code != 200 || !strings.Contains(r.body, "app.js") {
		t.Errorf("GET /ui/ with the cookie: %d", r.code)
	}
	var sess struct{ CSRF string }
	r = uiDo(t, c, "GET", base+"/ui/session", "")
	if err := json.Unmarshal([]byte(r.body), &sess); err != nil || sess.CSRF == "" {
		t.Fatalf("GET /ui/session: %d %s", r.code, r.body)
	}
	put := func(c *http.Client, hdr ...string) uiResp {
		return uiDo(t, c, "PUT", base+"/v1/records/shop.example.com/pools/primary/state", `{"state":"drain"}`,
			append([]string{"Content-Type", "application/json"}, hdr...)...)
	}
	if r := put(c); r.code != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
		t.Errorf("PUT with the cookie and no CSRF token: %d %s", r.code, r.body)
	}
	if r := put(c, api.CSRFHeader, sess.CSRF); r.code != http.StatusNoContent {
		t.Errorf("PUT with the cookie and the CSRF token: %d %s", r.code, r.body)
	}

	// A renewed certificate: served from the next connection, the session
	// kept.
	certPEM, keyPEM, cert2 := selfSigned(t, 2)
	roots.AddCert(cert2)
	writeFile(t, n.dir, "api.crt", certPEM)
	writeFile(t, n.dir, "api.key", keyPEM)
	res, err := n.Reload(context.Background())
	if err != nil || !strings.Contains(strings.Join(res.Changed, "\n"), "api certificate renewed") {
		t.Fatalf("reload with a renewed certificate: %v %+v", err, res)
	}
	r = uiDo(t, c, "GET", base+"/v1/status", "")
	if r.code != 200 || r.tls == nil || r.tls.PeerCertificates[0].SerialNumber.Int64() != 2 {
		t.Errorf("after the renewal: %d, want 200 with certificate 2 (%v)", r.code, r.tls != nil)
	}

	// A rotated token ends the session.
	writeFile(t, n.dir, "token", "tok-2")
	if res, err := n.Reload(context.Background()); err != nil {
		t.Fatalf("reload with a new token: %v %+v", err, res)
	}
	if r := uiDo(t, c, "GET", base+"/v1/status", ""); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status with the old session after the token rotated: %d", r.code)
	}

	// api.ui_public: pages open, changes still need the token.
	writeFile(t, n.dir, "steer.yaml", cfg(withTLS+", ui_public: true"))
	if res, err := n.Reload(context.Background()); err != nil {
		t.Fatalf("reload with ui_public: %v %+v", err, res)
	}
	anon := uiClient(roots)
	if r := uiDo(t, anon, "GET", base+"/ui/", ""); r.code != 200 {
		t.Errorf("GET /ui/ with ui_public: %d", r.code)
	}
	if r := uiDo(t, anon, "GET", base+"/v1/status", ""); r.code != http.StatusUnauthorized {
		t.Errorf("GET /v1/status with ui_public: %d", r.code)
	}
	if r := put(anon); r.code != http.StatusUnauthorized {
		t.Errorf("PUT with ui_public: %d", r.code)
	}

	// TLS off: the same address serves plain HTTP, the cookie is not
	// Secure there.
	writeFile(t, n.dir, "steer.yaml", cfg(""))
	res, err = n.Reload(context.Background())
	if err != nil || !strings.Contains(strings.Join(res.Changed, "\n"), "api tls off") {
		t.Fatalf("reload without TLS: %v %+v", err, res)
	}
	plain := uiClient(nil)
	r = uiLogin(t, plain, "http://"+n.APIAddr(), "tok-2")
	if sc, err := http.ParseSetCookie(r.h.Get("Set-Cookie")); r.code != http.StatusSeeOther || err != nil || sc.Secure {
		t.Errorf("login over plain HTTP: %d %q", r.code, r.h.Get("Set-Cookie"))
	}
	if r := uiDo(t, plain, "GET", "http://"+n.APIAddr()+"/v1/status", ""); r.code != 200 {
		t.Errorf("GET /v1/status over plain HTTP with the session: %d", r.code)
	}
}
