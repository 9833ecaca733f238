//go:build !race

package zone_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/zone"
)

// TestSignedPositiveDelv has delv (BIND 9.18) validate the positive
// answers of two signed zones served together, each with its own key
// as trust anchor: every type of the zone, a CNAME chain into the other
// zone, a DNAME, a wildcard and a renewed zone.
func TestSignedPositiveDelv(t *testing.T) {
	t.Parallel()
	dnstest.NeedTool(t, "delv")
	now := time.Now()
	sign := func(origin, text string, keys ...*dnssec.Key) (*zone.Zone, *dnssec.Key) {
		z, _ := mustParse(t, origin, text)
		s, err := dnssec.NewSigner(origin, keys, dnssec.Options{Validity: 48 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := z.Sign(s, now, 2); err != nil {
			t.Fatal(err)
		}
		return z, keys[0]
	}
	z1, k1 := sign("sign.test.", signText+"srv._tcp IN SRV 0 5 443 www\nother IN CNAME www.other.test.\nhinfo IN HINFO \"pc\" \"os\"\n",
		memKey(t, "sign.test.", dns.ED25519, true), memKey(t, "sign.test.", dns.ECDSAP256SHA256, false))
	z2, k2 := sign("other.test.", "$ORIGIN other.test.\n@ 300 IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ 300 IN NS ns1\nns1 300 IN A 192.0.2.8\nwww 300 IN AAAA 2001:db8::8\n",
		memKey(t, "other.test.", dns.ECDSAP256SHA256, true))
	// The renewal step, a day and a half on: every signature due again.
	later := now.Add(36 * time.Hour)
	z1, err := z1.Resigned(later, 2)
	if err != nil {
		t.Fatal(err)
	}
	set := zone.NewSet([]*zone.Zone{z1, z2})
	set.Precompile()
	addr := serveZone(t, set)
	dir := t.TempDir()
	anchor := filepath.Join(dir, "anchor.conf")
	conf := "trust-anchors {\n"
	for _, k := range []*dns.DNSKEY{k1.DNSKEY, k2.DNSKEY} {
		conf += fmt.Sprintf("  %s static-key %d %d %d %q;\n", k.Hdr.Name, k.Flags, k.Protocol, k.Algorithm, k.PublicKey)
	}
	if err := os.WriteFile(anchor, []byte(conf+"};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	for _, q := range []struct{ name, qtype, root string }{
		{"sign.test.", "SOA", ""}, {"sign.test.", "NS", ""}, {"sign.test.", "MX", ""},
		{"sign.test.", "DNSKEY", ""}, {"sign.test.", "CDS", ""}, {"sign.test.", "CDNSKEY", ""},
		{"www.sign.test.", "A", ""}, {"www.sign.test.", "AAAA", ""}, {"txt.sign.test.", "TXT", ""},
		{"srv._tcp.sign.test.", "SRV", ""}, {"hinfo.sign.test.", "HINFO", ""}, {"deep.ent.x.sign.test.", "TXT", ""},
		{"alias.sign.test.", "A", ""}, {"x.y.wild.sign.test.", "A", ""}, {"www.dn.sign.test.", "A", ""},
		{"sub.sign.test.", "DS", ""},
		{"other.sign.test.", "AAAA", ""}, {"www.other.test.", "AAAA", "other.test"},
	} {
		root := q.root
		if root == "" {
			root = "sign.test"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, "delv", "@"+host, "-p", port, "-a", anchor, "+root="+root,
			"+nosplit", q.name, q.qtype).CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "; fully validated") || strings.Contains(string(out), "insecure") {
			t.Errorf("delv %s %s (%v): want fully validated\n%s", q.name, q.qtype, err, out)
		}
	}
}
