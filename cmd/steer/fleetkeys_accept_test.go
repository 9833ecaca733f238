//go:build !race

// Three steer serve processes, etcd and delv: a wall-time heavy scenario.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
	"github.com/steer-dns/steer/internal/fleetnode"
	"github.com/steer-dns/steer/internal/validatortest"
)

// TestFleetSignedLarkbook is issue 29's "keys in the fleet" acceptance:
// three steer serve processes follow one etcd (TLS, client certificates
// required); the Larkbook zone, signed with a CSK made by steer dnssec
// keygen, is pushed with steer fleet push (no --allow-insecure-keys:
// the store is safe for keys). Every node publishes the same DNSKEY set,
// and delv, anchored at that one key, fully validates the steered
// shop.example.com A from each node, directly and for three ECS
// subnets (Pune, Berlin, Columbus) with the site steering gives them.
// Then a bundle with a key pair for a zone not pushed is published: every
// node keeps serving (and validating) the bundle before it and fleet
// status says why, naming the files; steer fleet rollback clears it. So
// for a bundle whose zone names the other zone's key (refused at its
// line). Over
// all that (nodes logging at debug), the private key appears nowhere:
// not in the nodes' logs, fleet status (text and --json), the push's
// output or any admin API answer; the state directories hold it only in
// the kept bundle, mode 0600.
func TestFleetSignedLarkbook(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
	dnstest.NeedTool(t, "delv")
	start := time.Now()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	push := filepath.Join(dir, "push")
	key := keygenTest(t, push, "example.com")
	priv, err := os.ReadFile(filepath.Join(push, key+".private"))
	if err != nil {
		t.Fatal(err)
	}
	// The private key as its file has it, and as the file's bytes travel
	// in JSON (the kept bundle, a status that marshalled the bundle).
	secrets := []string{base64.StdEncoding.EncodeToString(priv)}
	for _, l := range strings.Split(string(priv), "\n") {
		if v, ok := strings.CutPrefix(l, "PrivateKey: "); ok {
			secrets = append(secrets, v)
		}
	}
	if len(secrets) != 2 {
		t.Fatalf("no PrivateKey line in\n%s", priv)
	}
	city, err := filepath.Abs("../../testdata/geo/larkbook-city.mmdb")
	if err != nil {
		t.Fatal(err)
	}
	asn, _ := filepath.Abs("../../testdata/geo/larkbook-asn.mmdb")
	write("push/example.com.zone", validatortest.LarkbookZone())
	cfg := write("push/steer.yaml", fmt.Sprintf(`zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [%s] }
geo: { databases: [%q, %q] }
ecs: { enabled: true, max_source_v4: 28, max_source_v6: 56 }
records:
%s`, key, city, asn, dnstest.LarkbookRecord()))

	files := etcdtest.NewTLS(t)
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: files, ClientCertAuth: true})
	tlsLine := fmt.Sprintf("tls: { ca: %s, cert: %s, key: %s }", files.CA, files.ClientCert, files.ClientKey)
	var logs bytes.Buffer // everything the commands printed
	fleetCmd := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		rc := run(append([]string{"fleet"}, args...), &out, &errb)
		logs.WriteString(out.String() + errb.String())
		return rc, out.String() + errb.String()
	}
	write("token", "s3cret\n")
	type keyNode struct {
		name, file, dns, api, state string
		p                           *process
	}
	var nodes []*keyNode
	for i := 1; i <= 3; i++ {
		ports := dnstest.FreePorts(t, 2)
		n := &keyNode{name: fmt.Sprintf("n%d", i), dns: fmt.Sprintf("127.0.0.1:%d", ports[0]), api: fmt.Sprintf("127.0.0.1:%d", ports[1])}
		n.state = filepath.Join(dir, n.name, "state")
		n.file = write(n.name+"/steer.yaml", fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: ../token }
state_dir: state
fleet:
  node: %s
  etcd: { endpoints: [%s], dial_timeout: 1s, %s }
  lease_ttl: 2s
`, n.dns, n.api, n.name, strings.Join(etcd.Endpoints(), ", "), tlsLine))
		nodes = append(nodes, n)
	}
	if rc, out := fleetCmd("push", "--config", cfg, "--fleet", nodes[0].file); rc != 0 || strings.Contains(out, "warning") {
		t.Fatalf("push: %d %s", rc, out)
	}
	// Started side by side (each compiles the policy and signs the zone):
	// startSteer fails the test from its goroutine, which then ends.
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.p = startSteer(t, n.file, "--log-level", "debug")
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("keys, push and three nodes started: %v", time.Since(start).Round(time.Millisecond))

	// Every node serves the zone signed, with one DNSKEY set.
	anchor := validatortest.AnchorFromKeyFiles(t, "example.com", filepath.Join(push, key+".key"))
	var sets []string
	for _, n := range nodes {
		var set []string
		dnstest.WaitFor(t, 10*time.Second, n.name+" to serve the signed zone", func() bool {
			m := new(dns.Msg)
			m.SetQuestion("example.com.", dns.TypeDNSKEY)
			m.SetEdns0(1232, true)
			r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, n.dns)
			if err != nil {
				return false
			}
			set = set[:0]
			for _, rr := range r.Answer {
				if k, ok := rr.(*dns.DNSKEY); ok {
					set = append(set, fmt.Sprintf("%d %d %d %s", k.Flags, k.Protocol, k.Algorithm, k.PublicKey))
				}
			}
			return len(set) > 0
		})
		slices.Sort(set)
		sets = append(sets, strings.Join(set, "\n"))
	}
	if sets[0] != sets[1] || sets[1] != sets[2] || !strings.Contains(sets[0], anchor.Keys[0].PublicKey) {
		t.Errorf("the nodes' DNSKEY sets differ or lack the pushed key:\n%s", strings.Join(sets, "\n--\n"))
	}

	// delv validates the steered answer from each node, with the one key.
	cases := []struct {
		subnet string
		want   []string
	}{
		{"", nil},
		{"192.0.2.0/28", []string{"203.0.113.10"}},              // Pune: ap-south
		{"192.0.2.48/28", []string{"198.51.100.20"}},            // Berlin: eu-central
		{"192.0.2.96/28", []string{"192.0.2.30", "192.0.2.31"}}, // Columbus: us-east or its canary
	}
	validate := func(what string) {
		t.Helper()
		var jobs []validatortest.DelvJob
		for _, n := range nodes {
			server := netip.MustParseAddrPort(n.dns)
			d := validatortest.NewDelv(t, server, anchor)
			for _, c := range cases {
				via := d
				if c.subnet != "" {
					via = d.Via(validatortest.ECSRelay(t, server, netip.MustParsePrefix(c.subnet)))
				}
				jobs = append(jobs, validatortest.DelvJob{Delv: via, Query: validatortest.DelvQuery{Name: "shop.example.com", Qtype: dns.TypeA}})
			}
		}
		for i, r := range validatortest.RunDelv(jobs) {
			n, c := nodes[i/len(cases)], cases[i%len(cases)]
			ok := r.Validated && len(r.Answer) == 1
			if ok && c.want != nil {
				a, isA := r.Answer[0].(*dns.A)
				ok = isA && slices.Contains(c.want, a.A.String())
			}
			if !ok {
				t.Errorf("%s: %s shop.example.com A (ECS %q): want fully validated, one A in %v: %s", what, n.name, c.subnet, c.want, r)
			}
		}
	}
	t0 := time.Now()
	validate("pushed")
	t.Logf("delv: %d queries fully validated in %v", len(nodes)*len(cases), time.Since(t0).Round(time.Millisecond))

	// A bundle with a key pair for a zone not pushed (published as a
	// tool other than steer fleet push might): not served, and fleet
	// status says why on every node.
	store, err := fleet.OpenEtcd(fleet.EtcdConfig{Endpoints: etcd.Endpoints(), CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := fleet.ReadBundle(ctx, store, "/steer/v1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := dnssec.GenerateKey("example.org", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	opub, opriv := other.Files(time.Now())
	stray := "keys/" + other.BaseName()
	bad := fleet.Bundle{Files: maps.Clone(cur.Files)}
	bad.Files[stray+".key"], bad.Files[stray+".private"] = opub, opriv
	if len(fleetnode.HasPrivateKeys(fleetnode.Secrets(bad))) != 2 {
		t.Errorf("Secrets of the bad bundle: %v", fleetnode.Secrets(bad))
	}
	if _, _, err := fleet.Publish(ctx, store, "/steer/v1", bad, cur.Rev); err != nil {
		t.Fatal(err)
	}
	dnstest.WaitFor(t, 5*time.Second, "fleet status to show every node refusing the bundle with the stray key", func() bool {
		_, out := fleetCmd("status", "--fleet", nodes[0].file)
		return strings.Count(out, stray+".key, "+stray+".private: DNSSEC key files that no zone's dnssec.keys names") == 3
	}, func() string { _, out := fleetCmd("status", "--fleet", nodes[0].file); return out })
	for _, n := range nodes {
		// The status is in the store before the log line has come
		// through the process's stderr pipe.
		dnstest.WaitFor(t, 3*time.Second, n.name+" to log why it refused the bundle", func() bool {
			return strings.Contains(n.p.log(), "no zone's dnssec.keys names")
		}, n.p.log)
	}
	validate("after the bundle with a stray key")
	if rc, out := fleetCmd("rollback", "--fleet", nodes[0].file); rc != 0 || strings.Contains(out, "warning") {
		t.Fatalf("rollback: %d %s", rc, out)
	}
	noneRefusing := func() {
		t.Helper()
		dnstest.WaitFor(t, 5*time.Second, "fleet status to show no node refusing a bundle", func() bool {
			_, out := fleetCmd("status", "--fleet", nodes[0].file)
			return !strings.Contains(out, "rejected")
		}, func() string { _, out := fleetCmd("status", "--fleet", nodes[0].file); return out })
	}
	noneRefusing()

	// The zone names the other zone's key (a push that skipped steer
	// check): every node refuses it at the key's line, and keeps serving
	// the zone signed.
	if cur, err = fleet.ReadBundle(ctx, store, "/steer/v1"); err != nil {
		t.Fatal(err)
	}
	bad = fleet.Bundle{Files: maps.Clone(cur.Files)}
	bad.Files[stray+".key"], bad.Files[stray+".private"] = opub, opriv
	bad.Files[fleet.ConfigName] = []byte(strings.Replace(string(cur.Files[fleet.ConfigName]), "keys: ["+key+"]", "keys: ["+key+", "+stray+"]", 1))
	if _, _, err := fleet.Publish(ctx, store, "/steer/v1", bad, cur.Rev); err != nil {
		t.Fatal(err)
	}
	want := "steer.yaml:4: zones: example.com: dnssec key " + stray + " is a key for example.org., not for example.com. (a zone this configuration does not serve)"
	dnstest.WaitFor(t, 5*time.Second, "fleet status to show every node refusing the key for another zone", func() bool {
		_, out := fleetCmd("status", "--fleet", nodes[0].file)
		return strings.Count(out, want) == 3
	}, func() string { _, out := fleetCmd("status", "--fleet", nodes[0].file); return out })
	for _, n := range nodes {
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		m.SetEdns0(1232, true)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, n.dns)
		if err != nil || len(r.Answer) != 2 || r.Answer[1].Header().Rrtype != dns.TypeRRSIG || r.Answer[1].(*dns.RRSIG).KeyTag != anchor.Keys[0].KeyTag() {
			t.Errorf("%s after the bundle with a key for another zone: %v %v", n.name, r, err)
		}
	}
	if rc, out := fleetCmd("rollback", "--fleet", nodes[0].file); rc != 0 {
		t.Fatalf("rollback: %d %s", rc, out)
	}
	noneRefusing()

	// Nothing shows the private key.
	fleetCmd("status", "--fleet", nodes[0].file, "--json")
	shown := map[string]string{"steer fleet push, status (text and --json), rollback": logs.String()}
	for _, n := range nodes {
		shown[n.name+"'s log"] = n.p.log()
		for _, path := range []string{"/v1/status", "/v1/fleet", "/v1/overview", "/v1/records/shop.example.com.", "/v1/explain?name=shop.example.com&type=A", "/metrics"} {
			code, body := apiCall(t, n.api, "s3cret", "GET", path, "", "")
			if code != 200 {
				t.Errorf("%s GET %s: %d %s", n.name, path, code, body)
			}
			shown[n.name+" GET "+path] = body
		}
		// The state directory: the kept bundle holds the key, 0600;
		// nothing else does.
		kept := false
		filepath.WalkDir(n.state, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				t.Error(err)
				return nil
			}
			info, _ := d.Info()
			has := strings.Contains(string(data), secrets[0]) || strings.Contains(string(data), secrets[1])
			switch {
			case has && p == filepath.Join(n.state, "fleet", fleetnode.BundleCache):
				kept = true
				if info.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", p, info.Mode())
				}
			case has:
				t.Errorf("%s (mode %v) holds the private key", p, info.Mode())
			}
			return nil
		})
		if !kept {
			t.Errorf("%s: the kept bundle does not hold the key", n.name)
		}
	}
	for where, text := range shown {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("the private key shows in %s", where)
			}
		}
	}
	if !strings.Contains(nodes[0].p.log(), "level=DEBUG") {
		t.Error("the nodes do not log at debug: the leak check would miss what they log there")
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
