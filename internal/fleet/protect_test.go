package fleet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// TestProtection: what a store says of its protection, checked against
// real embedded etcd members: plain HTTP without and with a username
// (etcd ignores it while its authentication is off), then with
// authentication on; TLS that asks for client certificates, with and
// without one; TLS that does not ask (a certificate protects nothing
// there).
func TestProtection(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, name string, cfg fleet.EtcdConfig, tls bool, auth string, missing ...string) {
		t.Helper()
		p := fleet.ProtectionOf(context.Background(), open(t, cfg))
		if p.TLS != tls || p.Auth != auth || len(p.Missing) != len(missing) || p.OK() != (len(missing) == 0) {
			t.Errorf("%s: %+v, want TLS %v, auth %q and %d missing", name, p, tls, auth, len(missing))
			return
		}
		for i, m := range missing {
			if !strings.Contains(p.Missing[i], m) {
				t.Errorf("%s: missing[%d] = %q, want it to say %q", name, i, p.Missing[i], m)
			}
		}
		t.Logf("%s: %+v", name, p)
	}
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		c := etcdtest.Start(t, etcdtest.Options{})
		ep := c.Endpoints()
		check(t, "http, no credentials", fleet.EtcdConfig{Endpoints: ep}, false, "", "no TLS: the endpoints ("+ep[0]+") are plain HTTP", "no authentication: neither a username")
		check(t, "http, a username etcd ignores", fleet.EtcdConfig{Endpoints: ep, Username: "root", Password: "pw"}, false, "",
			"no TLS", "etcd's authentication is not enabled (etcdctl auth enable)")
		c.EnableAuth("pw")
		check(t, "http, authentication on", fleet.EtcdConfig{Endpoints: ep, Username: "root", Password: "pw"}, false, "username and password", "no TLS")
	})
	files := etcdtest.NewTLS(t)
	t.Run("TLS asking for certificates", func(t *testing.T) {
		t.Parallel()
		c := etcdtest.Start(t, etcdtest.Options{TLS: files, ClientCertAuth: true})
		ep := c.Endpoints()
		check(t, "https, client certificate", fleet.EtcdConfig{Endpoints: ep, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}, true, "client certificate")
		check(t, "https, no certificate", fleet.EtcdConfig{Endpoints: ep, CAFile: files.CA}, true, "", "no authentication: neither")
		// The same member named by http:// URLs: the client drops TLS.
		plain := []string{strings.Replace(ep[0], "https://", "http://", 1)}
		check(t, "http:// with TLS files", fleet.EtcdConfig{Endpoints: plain, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}, false, "",
			"are http://", "no authentication: the client certificate is not sent over http://")
	})
	t.Run("TLS not asking", func(t *testing.T) {
		t.Parallel()
		c := etcdtest.Start(t, etcdtest.Options{TLS: files})
		ep := c.Endpoints()
		check(t, "https, a certificate nobody asks for", fleet.EtcdConfig{Endpoints: ep, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey}, true, "",
			"the members at "+ep[0]+" do not require a client certificate (start etcd with --client-cert-auth")
	})
}
