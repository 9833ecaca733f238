package policy_test

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
)

// setKey names an answer set by its records' data, order-free.
func setKey(qtype uint16, rrs []dns.RR) string {
	var parts []string
	for _, rr := range rrs {
		h := *rr.Header()
		parts = append(parts, strings.TrimPrefix(rr.String(), h.String()))
	}
	slices.Sort(parts)
	return dns.TypeToString[qtype] + " " + strings.Join(parts, ",")
}

// TestAnswerSetsCoverDecisions: whatever the client and whatever health
// says, every answer a record gives (A and AAAA, AppendAnswer and
// AppendWire) is a set AnswerSets or OnHealth gave before the state was
// published — what lets a signed zone answer every steered query from
// signatures made ahead of time.
func TestAnswerSetsCoverDecisions(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: mv.example.com
    pools:
      a: { addresses: [192.0.2.1, 192.0.2.2, "2001:db8::1", "2001:db8::2"], location: { lat: 19.08, lon: 72.88 } }
      b: { addresses: [192.0.2.3, 192.0.2.4], location: { lat: 50.11, lon: 8.68 } }
      c: { addresses: [192.0.2.5, "2001:db8::5"], location: { lat: 38.95, lon: -77.45 } }
      d: { address: 192.0.2.6 }
    rules:
      - match: { country: IN }
        multivalue: 3
        pools: [a, b, c]
      - match: { continent: EU }
        failover: [b, c, d]
      - match: { continent: [NA, SA] }
        split:
          - { pool: a, weight: 3 }
          - { pool: d, weight: 1 }
      - default: { by: geoproximity, fallback: [c, a, b] }
    on_unhealthy: next_rule
  - name: fb.example.com
    pools:
      x: { addresses: [198.51.100.1, 198.51.100.2] }
      y: { address: 198.51.100.3 }
    rules:
      - default: { pool: x }
    when_all_down: fallback_pool y
  - name: cn.example.com
    type: CNAME
    pools:
      p: { target: p.cdn.example.net }
      q: { target: q.cdn.example.net }
    rules:
      - default: { multivalue: 1 }
`+larkbookRecord))
	live := policy.NewLive(table, policy.LiveOptions{})
	known := map[string]bool{}
	for _, r := range table.Records {
		r.AnswerSets(func(qt uint16, rrs []dns.RR) { known[r.Name+" "+setKey(qt, rrs)] = true })
	}
	onHealth := 0
	live.OnHealth(func(r *policy.Record, qt uint16, rrs []dns.RR) {
		onHealth++
		known[r.Name+" "+setKey(qt, rrs)] = true
	})
	rng := rand.New(rand.NewPCG(1, 2))
	clients := []string{"192.0.2.0", "198.51.100.0", "203.0.113.0", "8.8.8.0", "91.64.0.0", "10.20.0.0", "2001:db8:1::"}
	var wire []byte
	for round := range 40 {
		if round > 0 { // the first round: no health state at all
			down := map[netip.Addr]bool{}
			for _, r := range table.Records {
				for _, p := range r.Pools {
					for _, a := range append(slices.Clone(p.V4), p.V6...) {
						down[a] = rng.IntN(3) == 0
					}
				}
			}
			live.SetHealth(func(a netip.Addr, _ string) bool { return !down[a] }, nil)
		}
		for _, r := range table.Records {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				for range 30 {
					c := addr(clients[rng.IntN(len(clients))])
					q := policy.Query{Client: c, ClientBits: c.BitLen(), Qtype: qt}
					st := live.Decide(r, &q, 0)
					if st.NoData || st.ServFail {
						continue
					}
					rrs := r.AppendAnswer(nil, &st.Decision, qt, st.Addrs)
					set := qt
					if r.Type == dns.TypeCNAME {
						set = dns.TypeCNAME
					}
					if k := r.Name + " " + setKey(set, rrs); !known[k] {
						t.Fatalf("round %d: %s answered %q, a set never enumerated", round, r.Name, k)
					}
					if r.Type == dns.TypeCNAME {
						continue
					}
					var n int
					var ok bool
					wire, n, ok = r.AppendWire(wire[:0], &st.Decision, qt, st.Addrs, r.TTL)
					if !ok || n != len(rrs) {
						t.Fatalf("AppendWire: %d records, %v; AppendAnswer %d", n, ok, len(rrs))
					}
					var got []dns.RR
					for off := 0; off < len(wire); {
						l := 12 + (int(wire[off+10])<<8 | int(wire[off+11]))
						rdata := wire[off+12 : off+l]
						if qt == dns.TypeA {
							got = append(got, &dns.A{Hdr: dns.RR_Header{Name: r.Name, Rrtype: qt, Class: 1, Ttl: r.TTL}, A: slices.Clone(rdata)})
						} else {
							got = append(got, &dns.AAAA{Hdr: dns.RR_Header{Name: r.Name, Rrtype: qt, Class: 1, Ttl: r.TTL}, AAAA: slices.Clone(rdata)})
						}
						off += l
					}
					if k := r.Name + " " + setKey(qt, got); !known[k] {
						t.Fatalf("round %d: %s wrote %q, a set never enumerated", round, r.Name, k)
					}
				}
			}
		}
	}
	if onHealth == 0 {
		t.Fatal("OnHealth was never called")
	}
}

// TestMultivalueWindows: a multivalue limit answers a window of
// consecutive addresses (in the record's order, wrapping), so a record
// with n addresses has n possible sets, each used.
func TestMultivalueWindows(t *testing.T) {
	table := mustBuild(t, configYAML(t, []string{cityDB, asnDB}, `
  - name: mv.example.com
    pools:
      a: { addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3, 192.0.2.4, 192.0.2.5] }
    rules:
      - default: { multivalue: 2 }
`))
	r := table.Get("mv.example.com.")
	d := r.Decide(query(r, "192.0.2.0", 24, ""))
	windows := map[string]bool{"1,2": true, "2,3": true, "3,4": true, "4,5": true, "1,5": true}
	seen := map[string]bool{}
	for range 500 {
		var last []string
		for _, rr := range r.AppendAnswer(nil, &d, dns.TypeA, nil) {
			last = append(last, strings.TrimPrefix(rr.(*dns.A).A.String(), "192.0.2."))
		}
		slices.Sort(last)
		k := strings.Join(last, ",")
		if !windows[k] {
			t.Fatalf("answer %s is not a rotation window", k)
		}
		seen[k] = true
	}
	if len(seen) != len(windows) {
		t.Errorf("windows used: %v, want all 5", seen)
	}
	sets := map[string]bool{}
	r.AnswerSets(func(qt uint16, rrs []dns.RR) { sets[setKey(qt, rrs)] = true })
	if len(sets) != 5+1 { // 5 windows, and pool a whole (alone, or failing open)
		t.Errorf("%d sets enumerated, want 6: %v", len(sets), sets)
	}
}
