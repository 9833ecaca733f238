package steeringtest

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// wantNoData checks an authoritative NOERROR with no answer and the zone's
// SOA (negative TTL 300) in the authority section.
func wantNoData(t *testing.T, r *dns.Msg) {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 0 {
		t.Fatalf("rcode %s aa %v answers %d, want NODATA (NOERROR, aa, no answer)\n%v", dns.RcodeToString[r.Rcode], r.Authoritative, len(r.Answer), r)
	}
	if len(r.Ns) != 1 {
		t.Fatalf("%d authority records, want the SOA\n%v", len(r.Ns), r)
	}
	soa, ok := r.Ns[0].(*dns.SOA)
	if !ok || soa.Hdr.Name != "example.com." || soa.Hdr.Ttl != 300 {
		t.Errorf("authority %v, want example.com.'s SOA with TTL 300", r.Ns[0])
	}
}

// TestNoData: shop.example.com only has IPv4 pools, so AAAA is NODATA; so
// is any other type at the steered name. The answer does not depend on the
// client, so the ECS scope is 0.
func TestNoData(t *testing.T) {
	srv := start(t, cfgOpts{})
	for _, c := range []struct {
		qtype  uint16
		subnet string
	}{
		{dns.TypeAAAA, berlinPfx},
		{dns.TypeAAAA, "2001:db8:2::/56"},
		{dns.TypeAAAA, ""},
		{dns.TypeNS, punePfx},
		{dns.TypeNS, ""},
		{dns.TypeMX, columbusPfx},
		{dns.TypeTXT, ""},
	} {
		name := dns.TypeToString[c.qtype] + " " + c.subnet
		for _, network := range []string{"udp", "tcp"} {
			m := ecsQuery(shop, c.qtype, c.subnet)
			cl := &dns.Client{Net: network, Timeout: 3 * time.Second}
			r, _, err := cl.Exchange(m, srv.V4.String())
			if err != nil {
				t.Fatalf("%s %s: %v", name, network, err)
			}
			wantNoData(t, r)
			if c.subnet != "" {
				wantECS(t, r, netip.MustParsePrefix(c.subnet), 0)
			} else {
				wantNoECS(t, r)
			}
		}
		// kdig agrees.
		args := []string{"+norec", "shop.example.com", dns.TypeToString[c.qtype]}
		if c.subnet != "" {
			args = append(args, "+subnet="+c.subnet)
		}
		k := parseKdig(t, dnstest.Kdig(t, srv.V4, args...))
		if k.status != "NOERROR" || !k.hasFlag("aa") || k.ancount != 0 || !k.authSOA {
			t.Errorf("kdig %s: want NODATA with aa and SOA\n%s", name, k.raw)
		}
		if c.subnet != "" && k.ecs != c.subnet+"/0" {
			t.Errorf("kdig %s: CLIENT-SUBNET %q, want %s/0", name, k.ecs, c.subnet)
		}
	}
	// Below the steered name nothing exists: NXDOMAIN.
	r, _ := exchangeRaw(t, srv.V4, ecsQuery("x.shop.example.com.", dns.TypeA, berlinPfx))
	if r.Rcode != dns.RcodeNameError || !r.Authoritative {
		t.Errorf("x.shop.example.com: rcode %s aa %v, want NXDOMAIN aa", dns.RcodeToString[r.Rcode], r.Authoritative)
	}
	// ANY at the steered name answers the steered A RRset (RFC 8482).
	r, _ = exchangeRaw(t, srv.V4, ecsQuery(shop, dns.TypeANY, berlinPfx))
	if got := addrs(r, shop); len(got) != 1 || got[0] != euCentral {
		t.Errorf("ANY: answer %v, want %s", got, euCentral)
	}
}

// TestCNAMEToSteered: www.example.com is a zone CNAME to the steered name;
// the answer is the CNAME then the steered A, and the scope is the steered
// part's.
func TestCNAMEToSteered(t *testing.T) {
	srv := start(t, cfgOpts{})
	const www = "www.example.com."
	for _, c := range []struct {
		subnet string
		want   []string
		scope  int
	}{
		{berlinPfx, []string{euCentral}, 28},
		{punePfx, []string{apSouth}, 27},
		{lisbonPfx, []string{euCentral}, 27},
		{columbusPfx, []string{usEast, usEastCanary}, 27},
		{"2001:db8:2::/56", []string{apSouth}, 47},
	} {
		sent := netip.MustParsePrefix(c.subnet)
		r, pkt := exchangeRaw(t, srv.V4, ecsQuery(www, dns.TypeA, c.subnet))
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 2 {
			t.Fatalf("www %s: rcode %s aa %v\n%v", c.subnet, dns.RcodeToString[r.Rcode], r.Authoritative, r)
		}
		cn, ok := r.Answer[0].(*dns.CNAME)
		if !ok || cn.Hdr.Name != www || cn.Target != shop || cn.Hdr.Ttl != 3600 {
			t.Errorf("www %s: first answer %v, want www CNAME shop with TTL 3600", c.subnet, r.Answer[0])
		}
		a, ok := r.Answer[1].(*dns.A)
		if !ok || a.Hdr.Name != shop || a.Hdr.Ttl != 60 || !contains(c.want, a.A.String()) {
			t.Errorf("www %s: second answer %v, want shop A %v TTL 60", c.subnet, r.Answer[1], c.want)
		}
		wantECSWire(t, pkt, sent, c.scope)

		k := kdigA(t, srv.V4, "www.example.com", c.subnet)
		if len(k.answers) != 2 || k.answers[0].typ != "CNAME" || k.answers[0].rdata != shop ||
			k.answers[1].typ != "A" || !contains(c.want, k.answers[1].rdata) || k.answers[1].ttl != 60 {
			t.Errorf("kdig www %s: answers %+v\n%s", c.subnet, k.answers, k.raw)
		}
		if want := c.subnet + "/" + itoa(c.scope); k.ecs != want {
			t.Errorf("kdig www: CLIENT-SUBNET %q, want %q", k.ecs, want)
		}
	}
	// Asking for the CNAME itself does not reach the steered name: scope 0.
	r, pkt := exchangeRaw(t, srv.V4, ecsQuery(www, dns.TypeCNAME, berlinPfx))
	if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("www CNAME: %v", r)
	}
	wantECSWire(t, pkt, netip.MustParsePrefix(berlinPfx), 0)
	// AAAA through the CNAME: the CNAME, then NODATA at shop; scope 0.
	r, pkt = exchangeRaw(t, srv.V4, ecsQuery(www, dns.TypeAAAA, berlinPfx))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("www AAAA: want the CNAME only\n%v", r)
	}
	wantECSWire(t, pkt, netip.MustParsePrefix(berlinPfx), 0)
	// Without ECS the resolver's address steers the CNAME's target too.
	r, _ = handleFrom(t, srv.Handler(), query(www, dns.TypeA), berlinHost)
	if got := addrs(r, shop); len(got) != 1 || got[0] != euCentral {
		t.Errorf("www from a Berlin resolver: %v, want %s", got, euCentral)
	}
	wantNoECS(t, r)
}

// TestSplitOverTheWire sends 2,000 UDP queries from North American subnets:
// rule 3 splits them 95/5 between us-east and us-east-canary (not sticky,
// so every query draws again). At this sample size the canary's share has
// a standard deviation near 0.5 percentage points; ±3 is six of them.
func TestSplitOverTheWire(t *testing.T) {
	srv := start(t, cfgOpts{})
	const total, workers = 2000, 8
	subnets := []string{columbusPfx, chicagoPfx, ashburnPfx}
	scopes := map[string]int{columbusPfx: 27, chicagoPfx: 27, ashburnPfx: 28}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	var mu sync.Mutex
	counts := map[string]int{}
	var errs []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
			conn, err := c.Dial(srv.V4.String())
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer conn.Close()
			for i := w; i < total; i += workers {
				if ctx.Err() != nil {
					mu.Lock()
					errs = append(errs, "out of time")
					mu.Unlock()
					return
				}
				subnet := subnets[i%len(subnets)]
				m := ecsQuery(shop, dns.TypeA, subnet)
				r, _, err := c.ExchangeWithConnContext(ctx, m, conn)
				var got, bad string
				switch {
				case err != nil:
					bad = err.Error()
				case r.Id != m.Id || r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1:
					bad = "bad response: " + r.String()
				default:
					got = addrs(r, shop)[0]
					if s := respECS(r); s == nil || int(s.SourceScope) != scopes[subnet] || ecsPrefix(s) != subnet {
						bad = "ECS " + ecsString(s) + " for " + subnet
					}
					if r.Answer[0].Header().Ttl != 60 {
						bad = "TTL " + itoa(int(r.Answer[0].Header().Ttl))
					}
				}
				mu.Lock()
				if bad != "" {
					errs = append(errs, bad)
				} else {
					counts[got]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failed queries, first: %s", len(errs), errs[0])
	}
	if n := counts[usEast] + counts[usEastCanary]; n != total || len(counts) != 2 {
		t.Fatalf("answers %v, want only %s and %s, %d in all", counts, usEast, usEastCanary, total)
	}
	share := 100 * float64(counts[usEastCanary]) / total
	t.Logf("canary share %.2f%% (%d of %d)", share, counts[usEastCanary], total)
	if share < 2 || share > 8 {
		t.Errorf("canary share %.2f%%, want 5%% ± 3", share)
	}
}

func ecsString(s *dns.EDNS0_SUBNET) string {
	if s == nil {
		return "none"
	}
	return s.String()
}

// ecsPrefix renders an ECS option's address and source prefix.
func ecsPrefix(s *dns.EDNS0_SUBNET) string {
	a, ok := netip.AddrFromSlice(s.Address)
	if !ok {
		return "?"
	}
	if s.Family == 1 {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, int(s.SourceNetmask)).String()
}
