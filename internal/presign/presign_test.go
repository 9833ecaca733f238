package presign_test

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/presign"
)

const records = `
records:
  - name: shop.example.com
    ttl: 60
    ttl_while_degraded: 10
    pools:
      a: { addresses: [192.0.2.1, 192.0.2.2, "2001:db8::1"], location: { lat: 19.08, lon: 72.88 } }
      b: { addresses: [192.0.2.3], location: { lat: 50.11, lon: 8.68 } }
      c: { addresses: [192.0.2.5, 192.0.2.6, 192.0.2.7], location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: IN }
        multivalue: 2
        pools: [a, c]
      - default: { by: geoproximity, fallback: [a, b, c] }
  - name: www.example.com
    type: CNAME
    pools:
      x: { target: x.cdn.example.net }
      y: { target: y.cdn.example.net }
    rules:
      - default: { pool: x }
  - name: other.example.org
    pools:
      z: { address: 198.51.100.1 }
    rules:
      - default: { pool: z }
`

func table(t testing.TB) *policy.Table {
	t.Helper()
	var dbs []string
	set := &geo.Set{}
	for _, n := range []string{"larkbook-city.mmdb", "larkbook-asn.mmdb"} {
		p, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "geo", n))
		dbs = append(dbs, `"`+p+`"`)
		db, err := geo.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		set.DBs = append(set.DBs, db)
	}
	cfg, err := config.Parse(nil, "steer.yaml", []byte("geo: { databases: ["+dbs[0]+", "+dbs[1]+"] }"+records))
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := policy.Build(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func signer(t testing.TB) (*dnssec.Signer, *dnssec.Key) {
	t.Helper()
	k, err := dnssec.GenerateKey("example.com.", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dnssec.NewSigner("example.com.", []*dnssec.Key{k}, dnssec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// onlyExampleCom signs the names of example.com, not example.org's.
func onlyExampleCom(s *dnssec.Signer) func(string) *dnssec.Signer {
	return func(name string) *dnssec.Signer {
		if dns.IsSubDomain("example.com.", name) {
			return s
		}
		return nil
	}
}

// TestBuildSignsEverySet: every set a signed zone's steered record can
// answer is signed once and verifies; names of unsigned zones are not;
// a reload with the same sets re-signs nothing; the RRSIG RDATA in wire
// form is the one miekg/dns packs.
func TestBuildSignsEverySet(t *testing.T) {
	pt := table(t)
	s, k := signer(t)
	tb, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s)})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, r := range pt.Records {
		if r.Name == "other.example.org." {
			continue
		}
		r.AnswerSets(func(qt uint16, rrs []dns.RR) {
			e := tb.Lookup(r.Name, qt, dnssec.SetSum(rrs))
			if e == nil {
				t.Fatalf("%s %s %v: not signed", r.Name, dns.TypeToString[qt], rrs)
			}
			if err := e.Sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, rrs); err != nil {
				t.Fatalf("%s: %v", r.Name, err)
			}
			full := make([]byte, 512)
			end, err := dns.PackRR(e.Sigs[0], full, 0, nil, false)
			if err != nil || len(e.Wire) != 1 || !bytes.HasSuffix(full[:end], e.Wire[0]) || len(e.Wire[0]) != 18+len("example.com.")+1+64 {
				t.Fatalf("wire %x for %v", e.Wire, e.Sigs[0])
			}
		})
	}
	want = tb.Len()
	if tb.Signed != want || s.Made(dnssec.ReasonSteered) != uint64(want) || want < 10 {
		t.Fatalf("signed %d, made %d, table %d", tb.Signed, s.Made(dnssec.ReasonSteered), want)
	}
	other := pt.Get("other.example.org.")
	other.AnswerSets(func(qt uint16, rrs []dns.RR) {
		if tb.Lookup(other.Name, qt, dnssec.SetSum(rrs)) != nil {
			t.Fatal("a set of an unsigned zone was signed")
		}
	})
	again, err := presign.Build(presign.Options{Policies: table(t), Signer: onlyExampleCom(s), Previous: tb})
	if err != nil {
		t.Fatal(err)
	}
	if again.Signed != 0 || again.Reused != want || s.Made(dnssec.ReasonSteered) != uint64(want) {
		t.Fatalf("reload: signed %d reused %d (want 0 and %d)", again.Signed, again.Reused, want)
	}
	// Past the refresh point, a reload signs them all again.
	later, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s), Previous: tb,
		Now: func() time.Time { return time.Now().Add(13 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if later.Signed != want {
		t.Fatalf("renewal: signed %d of %d", later.Signed, want)
	}
	if tb, err := presign.Build(presign.Options{Policies: pt, Signer: func(string) *dnssec.Signer { return nil }}); tb != nil || err != nil {
		t.Fatalf("no signed zone: %v %v", tb, err)
	}
}

// TestHealthSignsBeforePublishing: a health change that makes a new set
// reachable (a pool's address down) has it signed before any answer can
// use it, and a query finds it with no signature made.
func TestHealthSignsBeforePublishing(t *testing.T) {
	pt := table(t)
	s, k := signer(t)
	tb, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s)})
	if err != nil {
		t.Fatal(err)
	}
	live := policy.NewLive(pt, policy.LiveOptions{})
	tb.Watch(live)
	r := pt.Get("shop.example.com.")
	down := netip.MustParseAddr("192.0.2.6")
	// The set {192.0.2.5, 192.0.2.7} (c without .6) is unknown before.
	c1, _ := dns.NewRR("shop.example.com. 60 IN A 192.0.2.5")
	c3, _ := dns.NewRR("shop.example.com. 60 IN A 192.0.2.7")
	set := []dns.RR{c1, c3}
	if tb.Lookup(r.Name, dns.TypeA, dnssec.SetSum(set)) != nil {
		t.Fatal("the set is signed before it is reachable")
	}
	before := s.Made(dnssec.ReasonSteered)
	live.SetHealth(func(a netip.Addr, _ string) bool { return a != down }, nil)
	e := tb.Lookup(r.Name, dns.TypeA, dnssec.SetSum(set))
	if e == nil {
		t.Fatal("health made a set reachable and it was not signed")
	}
	if err := e.Sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, set); err != nil {
		t.Fatal(err)
	}
	if s.Made(dnssec.ReasonSteered) == before {
		t.Fatal("no signature made")
	}
	// A query answering it (degraded TTL 10) finds it: no online signature.
	q := &presign.Query{T: tb, Now: time.Now().UnixNano()}
	c1d, c3d := dns.Copy(c1), dns.Copy(c3)
	c1d.Header().Ttl, c3d.Header().Ttl = 10, 10
	sigs := q.Steered(nil, r.Name, dns.TypeA, []dns.RR{c3d, c1d})
	if len(sigs) != 1 || sigs[0].Header().Ttl != 10 || s.Made(dnssec.ReasonOnline) != 0 {
		t.Fatalf("query: %v, online %d", sigs, s.Made(dnssec.ReasonOnline))
	}
	if err := sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, []dns.RR{c3d, c1d}); err != nil {
		t.Fatalf("served with TTL 10: %v", err)
	}
	// A reload while the address is still down (the live state kept, so
	// no health change follows) keeps the set, signed by the health
	// change, without signing it again; a table built anew against the
	// live state signs it.
	made := s.Made(dnssec.ReasonSteered)
	next, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s), Previous: tb, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	if next.Lookup(r.Name, dns.TypeA, dnssec.SetSum(set)) != e || next.Signed != 0 || s.Made(dnssec.ReasonSteered) != made {
		t.Fatalf("reload while degraded: signed %d, the degraded set %v", next.Signed, next.Lookup(r.Name, dns.TypeA, dnssec.SetSum(set)))
	}
	fresh, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s), Live: live})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Lookup(r.Name, dns.TypeA, dnssec.SetSum(set)) == nil {
		t.Fatal("a table built while degraded lacks the degraded set")
	}
}

// TestOnlineWithinBudget: a set no enumeration gave is signed once on a
// query's behalf while the budget allows (then found), refused over UDP
// past the budget (nil: the server answers TC), always made over TCP.
func TestOnlineWithinBudget(t *testing.T) {
	pt := table(t)
	s, k := signer(t)
	tb, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s), Budget: dnssec.NewBudget(10)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	name := "shop.example.com."
	odd := func(i int) []dns.RR {
		rr := &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).AsSlice()}
		return []dns.RR{rr}
	}
	udp := &presign.Query{T: tb, Now: now}
	sigs := udp.Steered(nil, name, dns.TypeA, odd(0))
	if len(sigs) != 1 || sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, odd(0)) != nil {
		t.Fatalf("online: %v", sigs)
	}
	udp.Steered(nil, name, dns.TypeA, odd(0))
	if s.Made(dnssec.ReasonOnline) != 1 {
		t.Fatalf("made %d online signatures for one set, want 1", s.Made(dnssec.ReasonOnline))
	}
	refused := false
	for i := 1; i < 50 && !refused; i++ {
		refused = udp.Steered(nil, name, dns.TypeA, odd(i)) == nil
	}
	if !refused || tb.Budget.Refused() == 0 {
		t.Fatal("the budget never refused a UDP query")
	}
	tcp := &presign.Query{T: tb, TCP: true, Now: now}
	if tcp.Steered(nil, name, dns.TypeA, odd(1000)) == nil {
		t.Fatal("TCP refused a signature")
	}
	// The node's cache outlives a key change: a table signing with a new
	// key never serves the old key's signature from it.
	s2, k2 := signer(t)
	tb2, err := presign.Build(presign.Options{Policies: pt, Signer: onlyExampleCom(s2), Cache: tb.Cache})
	if err != nil {
		t.Fatal(err)
	}
	sigs = (&presign.Query{T: tb2, TCP: true, Now: now}).Steered(nil, name, dns.TypeA, odd(0))
	if len(sigs) != 1 || sigs[0].(*dns.RRSIG).Verify(k2.DNSKEY, odd(0)) != nil {
		t.Fatalf("after a key change: %v", sigs)
	}
}
