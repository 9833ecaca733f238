package dnsserver_test

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/tsig"
)

// refusals is a dnsserver.Transfers that records what the handler
// refuses.
type refusals struct {
	mu   sync.Mutex
	errs []error
}

func (r *refusals) Transfer(dns.ResponseWriter, *dns.Msg, netip.Addr) error { return errors.New("no") }
func (r *refusals) Answer(*dns.Msg, netip.Addr, string) *dns.Msg            { return nil }
func (r *refusals) Refused(_ *dns.Msg, _ netip.Addr, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// TestTSIGAlgorithmBoundToKey: a query signed with a key the server has
// as hmac-sha256 is answered signed; the same secret under hmac-sha512
// or hmac-sha1 is NOTAUTH with BADKEY (RFC 8945 §5.2.1), and what the
// server logs names the key and both algorithms.
func TestTSIGAlgorithmBoundToKey(t *testing.T) {
	const secret = "c3RlZXIgdGVzdCBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyE="
	h, snap := steeredHandler(t)
	snap.SetTSIG(map[string]tsig.Key{"known": {Name: "known.", Algorithm: dns.HmacSHA256, Secret: secret}})
	rec := &refusals{}
	h.SetTransfers(rec)
	from := netip.MustParseAddr("127.0.0.1")
	for _, alg := range []string{dns.HmacSHA256, dns.HmacSHA512, dns.HmacSHA1} {
		m := query("www.example.com.", dns.TypeA)
		m.SetTsig("known.", alg, 300, time.Now().Unix())
		req, _, err := dns.TsigGenerate(m, secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(h.HandleFrom(req, dnsserver.TCP, from, nil)); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		ts := r.IsTsig()
		if alg == dns.HmacSHA256 {
			if r.Rcode != dns.RcodeSuccess || ts == nil || ts.Error != 0 {
				t.Errorf("its own algorithm: %s, TSIG %v", dns.RcodeToString[r.Rcode], ts)
			}
			continue
		}
		if r.Rcode != dns.RcodeNotAuth || ts == nil || ts.Error != dns.RcodeBadKey {
			t.Errorf("%s over the hmac-sha256 key's secret: %s, TSIG %v; want NOTAUTH, BADKEY", alg, dns.RcodeToString[r.Rcode], ts)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []string{
		"TSIG key known. is hmac-sha256, the message is signed with hmac-sha512",
		"TSIG key known. is hmac-sha256, the message is signed with hmac-sha1",
	}
	if len(rec.errs) != len(want) {
		t.Fatalf("refusals %v", rec.errs)
	}
	for i, w := range want {
		if rec.errs[i].Error() != w {
			t.Errorf("refusal %d: %q, want %q", i, rec.errs[i], w)
		}
	}
}
