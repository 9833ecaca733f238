//go:build !race

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
)

// TestKSKRolloverThroughAPI: a KSK rollover on one node through the
// admin API, checked against NSD serving the parent zone com. GET
// /v1/dnssec shows the plan (public keys only; a typo is a 404 naming
// it); roll-ksk publishes a new KSK that signs the DNSKEY RRset beside
// the old one, and the CDS names both; completing it is refused, naming
// the parent's DS, while the parent has only the old DS; with the new DS
// at the parent it withdraws the old KSK from the CDS while the old one
// still signs; a restart keeps the plan.
func TestKSKRolloverThroughAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kskBase, ksk := writeKey(t, dir, "example.com", true)
	zskBase, _ := writeKey(t, dir, "example.com", false)
	writeFile(t, dir, "token", "tok")
	writeFile(t, dir, "example.com.zone", signedZone(1, "v1"))
	writeFile(t, dir, "steer.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [%s, %s] }
`, kskBase, zskBase))
	n := startNodeIn(t, dir, Options{})
	get := func() api.KeyPlan {
		t.Helper()
		code, body := n.call("GET", "/v1/dnssec/example.com", "tok", "")
		var p api.KeyPlan
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("GET /v1/dnssec: %d %s", code, body)
		}
		if strings.Contains(body, "Private") || strings.Contains(body, "private") {
			t.Fatalf("private key material in the API's answer:\n%s", body)
		}
		return p
	}
	p := get()
	if len(p.Keys) != 2 || p.Source != "state directory" || len(p.ParentDS) != 1 || p.ParentDS[0] != dnssec.DSLine(dnssec.DSOf(ksk)) || p.Rolling != nil {
		t.Fatalf("plan before: %+v", p)
	}
	if code, body := n.call("GET", "/v1/dnssec/exmaple.com", "tok", ""); code != 404 || !strings.Contains(body, "exmaple.com.") {
		t.Errorf("a typo: %d %s", code, body)
	}
	if code, _ := n.call("POST", "/v1/dnssec/example.com/roll-ksk", "", ""); code != 401 {
		t.Errorf("roll-ksk without the token: %d", code)
	}
	apex := func() (dnskeys, cds, sigs int) {
		for _, q := range []uint16{dns.TypeDNSKEY, dns.TypeCDS} {
			r := n.doQuery("example.com", q)
			for _, rr := range r.Answer {
				switch rr.(type) {
				case *dns.DNSKEY:
					dnskeys++
				case *dns.CDS:
					cds++
				case *dns.RRSIG:
					if q == dns.TypeDNSKEY {
						sigs++
					}
				}
			}
		}
		return
	}
	if d, c, s := apex(); d != 2 || c != 1 || s != 1 {
		t.Fatalf("apex before: %d DNSKEY, %d CDS, %d RRSIG over the DNSKEYs", d, c, s)
	}

	code, body := n.call("POST", "/v1/dnssec/example.com/roll-ksk", "tok", "")
	var res api.RollResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Plan.Rolling == nil || len(res.Plan.ParentDS) != 2 {
		t.Fatalf("roll-ksk: %d %s", code, body)
	}
	newTag := res.Plan.Rolling.New
	if d, c, s := apex(); d != 3 || c != 2 || s != 2 {
		t.Fatalf("apex rolling: %d DNSKEY, %d CDS, %d RRSIG over the DNSKEYs; want 3, 2 (both KSKs), 2", d, c, s)
	}
	if code, body := n.call("POST", "/v1/dnssec/example.com/roll-ksk", "tok", ""); code != 400 || !strings.Contains(body, "under way") {
		t.Errorf("a second roll-ksk: %d %s", code, body)
	}
	var newDS string
	for _, k := range res.Plan.Keys {
		if k.Tag == newTag {
			newDS = k.DS
		}
	}
	// The parent zone, com., served by NSD: first with the old DS alone,
	// then (another NSD) with both.
	parent := func(ds ...string) *peertest.Server {
		var b strings.Builder
		b.WriteString("$ORIGIN com.\n$TTL 300\n@ SOA ns.nic hostmaster 1 3600 600 86400 300\n@ NS ns.nic\nns.nic A 192.0.2.1\nexample NS ns1.example\nns1.example A 192.0.2.53\n")
		for _, d := range ds {
			f := strings.Fields(d) // example.com. IN DS tag alg type digest
			fmt.Fprintf(&b, "example 60 DS %s %s %s %s\n", f[3], f[4], f[5], f[6])
		}
		pd := t.TempDir()
		dnstest.WriteFiles(t, pd, map[string]string{"com.zone": b.String()})
		return peertest.StartNSD(t, []peertest.Zone{{Origin: "com.", File: filepath.Join(pd, "com.zone")}}, peertest.Options{})
	}
	oldOnly := parent(p.ParentDS[0])
	code, body = n.call("POST", "/v1/dnssec/example.com/roll-ksk/complete", "tok", fmt.Sprintf(`{"parent_ns":%q}`, oldOnly.Addr.String()))
	if want := fmt.Sprintf("has no DS naming the new KSK %d", newTag); code != 400 || !strings.Contains(body, want) || !strings.Contains(body, fmt.Sprintf("names KSK %d", ksk.KeyTag())) {
		t.Fatalf("complete with the old DS only: %d %s, want 400 and %q", code, body, want)
	}
	if d, c, _ := apex(); d != 3 || c != 2 {
		t.Fatalf("apex after a refused completion: %d DNSKEY, %d CDS", d, c)
	}
	both := parent(p.ParentDS[0], newDS)
	code, body = n.call("POST", "/v1/dnssec/example.com/roll-ksk/complete", "tok", fmt.Sprintf(`{"parent_ns":%q,"tcp":true}`, both.Addr.String()))
	res = api.RollResult{}
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Plan.Rolling != nil || len(res.Plan.ParentDS) != 1 || res.Plan.ParentDS[0] != newDS {
		t.Fatalf("complete: %d %s", code, body)
	}
	if !strings.Contains(body, "the parent still has") {
		t.Errorf("completion does not say the parent should drop the old DS: %s", body)
	}
	if d, c, s := apex(); d != 3 || c != 1 || s != 2 {
		t.Fatalf("apex completed: %d DNSKEY, %d CDS, %d RRSIG; want 3 (the old KSK lingers for the parent's DS TTL), 1, 2", d, c, s)
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	n = startNodeIn(t, dir, Options{})
	if d, c, s := apex(); d != 3 || c != 1 || s != 2 {
		t.Fatalf("apex after a restart: %d DNSKEY, %d CDS, %d RRSIG", d, c, s)
	}
	if p := get(); p.Next == nil || !strings.Contains(p.Next.What, fmt.Sprintf("KSK %d", ksk.KeyTag())) {
		t.Errorf("next event after the restart: %+v", p.Next)
	}
}
