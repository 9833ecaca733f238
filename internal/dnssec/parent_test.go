package dnssec_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// TestParentDS has NSD serve a parent zone, example.com, delegating
// child.example.com with DS records made here (SHA-256 of one KSK,
// SHA-384 of another, one matching no key), unsigned.example.com without
// DS; ParentDS reads each set as NSD serves it, over UDP and TCP, and
// fails with a message naming why for a name the parent does not
// delegate and for a zone the server does not serve.
func TestParentDS(t *testing.T) {
	t.Parallel()
	k1, err := dnssec.GenerateKey("child.example.com", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := dnssec.GenerateKey("child.example.com", dns.ED25519, true)
	if err != nil {
		t.Fatal(err)
	}
	zsk, err := dnssec.GenerateKey("child.example.com", dns.ECDSAP256SHA256, false)
	if err != nil {
		t.Fatal(err)
	}
	ds1 := k1.DNSKEY.ToDS(dns.SHA256)
	ds2 := k2.DNSKEY.ToDS(dns.SHA384)
	stray := &dns.DS{Hdr: ds1.Hdr, KeyTag: 4711, Algorithm: 13, DigestType: 2, Digest: strings.Repeat("AB", 32)}
	dir := t.TempDir()
	zone := "$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 192.0.2.1\n" +
		"child NS ns.child\nns.child A 192.0.2.2\n" +
		fmt.Sprintf("child 120 DS %d %d %d %s\n", ds1.KeyTag, ds1.Algorithm, ds1.DigestType, ds1.Digest) +
		fmt.Sprintf("child 120 DS %d %d %d %s\n", ds2.KeyTag, ds2.Algorithm, ds2.DigestType, ds2.Digest) +
		fmt.Sprintf("child 120 DS %d %d %d %s\n", stray.KeyTag, stray.Algorithm, stray.DigestType, stray.Digest) +
		"unsigned NS ns.unsigned\nns.unsigned A 192.0.2.3\n"
	dnstest.WriteFiles(t, dir, map[string]string{"example.com.zone": zone})
	nsd := peertest.StartNSD(t, []peertest.Zone{{Origin: "example.com.", File: filepath.Join(dir, "example.com.zone")}}, peertest.Options{})
	server, err := dnssec.ParentServer(nsd.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tcp := range []bool{false, true} {
		ans, err := dnssec.ParentDS(ctx, "Child.Example.com", server, tcp, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.DS) != 3 || ans.TTL != 120 || (ans.Net == "tcp") != tcp {
			t.Fatalf("tcp=%v: %d DS, TTL %d over %s, want 3, 120", tcp, len(ans.DS), ans.TTL, ans.Net)
		}
		published := []*dns.DNSKEY{k1.DNSKEY, k2.DNSKEY, zsk.DNSKEY}
		c := dnssec.CheckDS(ans.DS, published, []*dns.DNSKEY{k1.DNSKEY})
		if len(c.Matched) != 1 || c.Matched[0].Key != k1.DNSKEY || len(c.Retiring) != 1 || c.Retiring[0].Key != k2.DNSKEY ||
			len(c.Stray) != 1 || c.Stray[0].DS.KeyTag != 4711 || len(c.Missing) != 0 || c.OK() {
			t.Fatalf("check against k1: %+v", c)
		}
		if !strings.Contains(c.Stray[0].Why, "no published key has its tag") {
			t.Errorf("stray DS: %s", c.Stray[0].Why)
		}
		if !c.Names(k2.DNSKEY) || c.Names(zsk.DNSKEY) {
			t.Errorf("Names: k2 %v, zsk %v", c.Names(k2.DNSKEY), c.Names(zsk.DNSKEY))
		}
		// k1 rolled: a new KSK the parent does not point at yet.
		k3, _ := dnssec.GenerateKey("child.example.com", dns.ECDSAP256SHA256, true)
		c = dnssec.CheckDS(ans.DS[:2], append(published, k3.DNSKEY), []*dns.DNSKEY{k1.DNSKEY, k2.DNSKEY, k3.DNSKEY})
		if len(c.Matched) != 2 || len(c.Missing) != 1 || c.Missing[0] != k3.DNSKEY || c.OK() {
			t.Fatalf("check with k3: %+v", c)
		}
		c = dnssec.CheckDS(ans.DS[:2], published, []*dns.DNSKEY{k1.DNSKEY, k2.DNSKEY})
		if !c.OK() {
			t.Fatalf("check of k1+k2: %+v", c)
		}
	}
	// A DS whose tag and algorithm are a key's, but not its digest.
	bad := *ds1
	bad.Digest = strings.Repeat("00", 32)
	if c := dnssec.CheckDS([]*dns.DS{&bad}, []*dns.DNSKEY{k1.DNSKEY}, []*dns.DNSKEY{k1.DNSKEY}); len(c.Stray) != 1 || !strings.Contains(c.Stray[0].Why, "digest differs") || len(c.Missing) != 1 {
		t.Fatalf("bad digest: %+v", c)
	}

	ans, err := dnssec.ParentDS(ctx, "unsigned.example.com", server, false, 2*time.Second)
	if err != nil || len(ans.DS) != 0 {
		t.Fatalf("unsigned delegation: %d DS, %v", len(ans.DS), err)
	}
	for name, want := range map[string]string{
		"nope.example.com": "does not exist (NXDOMAIN)",
		"example.org":      "REFUSED: it does not serve the parent zone",
	} {
		if _, err := dnssec.ParentDS(ctx, name, server, false, 2*time.Second); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	for in, want := range map[string]string{"192.0.2.1": "192.0.2.1:53", "[::1]:5300": "[::1]:5300", "::1": "[::1]:53", "ns.example:54": "ns.example:54", "ns.example": "ns.example:53"} {
		if got, err := dnssec.ParentServer(in); got != want || err != nil {
			t.Errorf("ParentServer(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := dnssec.ParentServer("192.0.2.1:99999"); err == nil {
		t.Error("port 99999 accepted")
	}
}
