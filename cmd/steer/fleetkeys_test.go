package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/etcdtest"
)

// keygenTest makes a key for zone with steer dnssec keygen into dir/keys and
// returns its base path relative to dir (as a configuration there names
// it).
func keygenTest(t *testing.T, dir, zone string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := run(append([]string{"dnssec", "keygen", zone, "--dir", filepath.Join(dir, "keys")}, args...), &out, &errb); rc != 0 {
		t.Fatalf("steer dnssec keygen %s: %d %s", zone, rc, errb.String())
	}
	base := strings.TrimSpace(out.String())
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// etcdNodeFile writes a node file whose fleet section names the store
// (for --fleet): endpoints, and the TLS files and credentials given as
// YAML lines under etcd.
func etcdNodeFile(t *testing.T, dir, name string, endpoints []string, etcd string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	body := fmt.Sprintf("fleet:\n  node: %s\n  etcd:\n    endpoints: [%s]\n    dial_timeout: 2s\n%s", strings.TrimSuffix(name, ".yaml"), strings.Join(endpoints, ", "), etcd)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFleetPushKeys: a configuration with a signed zone is pushed with
// its DNSSEC key pair only to an etcd that is TLS and authenticated, as
// etcd itself confirms: to a plain one the push is refused, naming the
// key file and what is missing and writing nothing, unless
// --allow-insecure-keys is given (then it warns); to TLS with a client
// certificate etcd requires, or with etcd's authentication on (username
// and password), it goes without a word; TLS with a username etcd ignores
// (its authentication off) is refused. A key for a zone the
// configuration does not serve is refused with file:line. promote and
// rollback write no keys and warn on a plain store.
func TestFleetPushKeys(t *testing.T) {
	t.Parallel() // waits on etcd: overlaps the other such tests
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := keygenTest(t, dir, "example.com")
	other := keygenTest(t, dir, "example.org")
	write("example.com.zone", zoneText(1, "signed"))
	signed := write("steer.yaml", "zones:\n  - origin: example.com\n    file: example.com.zone\n    dnssec: { keys: ["+key+"] }\n")
	wrong := write("wrong.yaml", "zones:\n  - origin: example.com\n    file: example.com.zone\n    dnssec:\n      keys: ["+key+", "+other+"]\n")
	push := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		rc := run(append([]string{"fleet"}, args...), &out, &errb)
		return rc, out.String(), errb.String()
	}
	priv := key + ".private"

	plain := etcdtest.Start(t, etcdtest.Options{})
	ep := strings.Join(plain.Endpoints(), ",")
	rc, out, errOut := push("push", "--config", signed, "--etcd", ep)
	for _, want := range []string{
		"steer fleet push: the bundle holds DNSSEC private keys (" + priv + "), and etcd is not both TLS and authenticated:",
		"\n  - no TLS: the endpoints (" + ep + ") are plain HTTP",
		"\n  - no authentication: neither a username and password nor a client certificate is set",
		"anyone who can read that etcd, or the network to it, has the keys and can sign anything for the zones",
		"--allow-insecure-keys", "Nothing was pushed",
	} {
		if rc != 1 || !strings.Contains(errOut, want) {
			t.Errorf("push to plain etcd: rc %d, want 1 and %q in\n%s%s", rc, want, out, errOut)
		}
	}
	if rc, out, _ := push("status", "--etcd", ep); rc != 0 || !strings.Contains(out, "published: nothing yet") {
		t.Errorf("status after the refused push: %d %s", rc, out)
	}
	rc, out, errOut = push("push", "--config", signed, "--etcd", ep, "--allow-insecure-keys")
	if rc != 0 || !strings.Contains(out, "serial 1") || !strings.Contains(errOut, "warning: --allow-insecure-keys: DNSSEC private keys ("+priv+") pushed to an etcd that is not both TLS and authenticated:") ||
		!strings.Contains(errOut, "can sign anything for the zones") {
		t.Errorf("push --allow-insecure-keys: rc %d\n%s%s", rc, out, errOut)
	}
	// A second push (the same files, a new serial), then rollback: no key
	// is written, and the warning says the keys are in a plain store.
	if rc, out, errOut := push("push", "--config", signed, "--etcd", ep, "--allow-insecure-keys"); rc != 0 {
		t.Fatalf("second push: %d %s%s", rc, out, errOut)
	}
	rc, out, errOut = push("rollback", "--etcd", ep)
	if rc != 0 || !strings.Contains(out, "rolled back from serial 2") || !strings.Contains(errOut, "warning: the bundle now current holds DNSSEC private keys ("+priv+")") {
		t.Errorf("rollback: rc %d\n%s%s", rc, out, errOut)
	}
	if rc, _, errOut := push("status", "--etcd", ep, "--allow-insecure-keys"); rc != 2 || !strings.Contains(errOut, "--allow-insecure-keys goes with push") {
		t.Errorf("status --allow-insecure-keys: %d %s", rc, errOut)
	}

	// A key for a zone the configuration does not serve: file:line.
	rc, out, errOut = push("push", "--config", wrong, "--etcd", ep, "--allow-insecure-keys")
	if want := wrong + ":5: zones: example.com: dnssec key " + other + " is a key for example.org., not for example.com. (a zone this configuration does not serve)"; rc != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "nothing was pushed") {
		t.Errorf("push with a key for another zone: rc %d, want %q in\n%s%s", rc, want, out, errOut)
	}

	files := etcdtest.NewTLS(t)
	tlsFiles := fmt.Sprintf("    tls: { ca: %s, cert: %s, key: %s }\n", files.CA, files.ClientCert, files.ClientKey)
	certAuth := etcdtest.Start(t, etcdtest.Options{TLS: files, ClientCertAuth: true})
	node := etcdNodeFile(t, dir, "cert.yaml", certAuth.Endpoints(), tlsFiles)
	if rc, out, errOut := push("push", "--config", signed, "--fleet", node); rc != 0 || errOut != "" || !strings.Contains(out, "serial 1") {
		t.Errorf("push to TLS with a client certificate: rc %d\n%s%s", rc, out, errOut)
	}

	// TLS that asks for no certificate, with a username: refused while
	// etcd's authentication is off, pushed once it is on.
	pw := write("etcd.password", "s3cret\n")
	tlsOnly := etcdtest.Start(t, etcdtest.Options{TLS: files})
	node = etcdNodeFile(t, dir, "user.yaml", tlsOnly.Endpoints(), fmt.Sprintf("    tls: { ca: %s }\n    username: root\n    password_file: %s\n", files.CA, pw))
	rc, out, errOut = push("push", "--config", signed, "--fleet", node)
	if rc != 1 || !strings.Contains(errOut, "no authentication: etcd's authentication is not enabled (etcdctl auth enable), so it ignores the username and password") || strings.Contains(errOut, "no TLS") {
		t.Errorf("push to TLS with a username etcd ignores: rc %d\n%s%s", rc, out, errOut)
	}
	tlsOnly.EnableAuth("s3cret")
	if rc, out, errOut := push("push", "--config", signed, "--fleet", node); rc != 0 || errOut != "" {
		t.Errorf("push to TLS with etcd's authentication on: rc %d\n%s%s", rc, out, errOut)
	}
}
