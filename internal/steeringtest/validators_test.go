//go:build !race

package steeringtest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/servertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// keyVariant is one way of signing the zone: the steer dnssec keygen
// runs that make its keys.
type keyVariant struct {
	name string
	runs [][]string // each: the arguments after "steer dnssec keygen example.com"
}

var (
	cskKeys     = keyVariant{"CSK ECDSAP256SHA256", [][]string{{}}}
	ed25519Keys = keyVariant{"KSK+ZSK ED25519", [][]string{{"--algorithm", "ed25519", "--ksk-zsk"}}}
	rsaKSKKeys  = keyVariant{"KSK RSASHA256 + ZSK ECDSAP256SHA256", [][]string{
		{"--algorithm", "rsasha256", "--role", "ksk"}, {"--algorithm", "ecdsap256sha256", "--role", "zsk"}}}
)

// signedLarkbook serves Larkbook signed with the variant's keys, made by
// steer dnssec keygen: the demo's zone (with its name servers on
// 127.0.0.1 and a wildcard, see validatortest.LarkbookZone) and the
// steered record, ECS up to /28 and /56 as the other steering tests. It
// returns the server and the trust anchor: the keys' SEP DNSKEYs, checked
// against what steer dnssec ds prints for the configuration and against
// the DNSKEY RRset the server publishes.
func signedLarkbook(t *testing.T, v keyVariant) (*servertest.Server, validatortest.Anchor, string) {
	t.Helper()
	keyDir := t.TempDir()
	var bases []string
	for _, run := range v.runs {
		args := append([]string{"dnssec", "keygen", "example.com", "--dir", keyDir}, run...)
		out, errOut, code := runSteer(t, args...)
		if code != 0 {
			t.Fatalf("steer %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		bases = append(bases, strings.Fields(out)...)
	}
	var keyFiles []string
	for i, b := range bases {
		if !filepath.IsAbs(b) {
			bases[i] = filepath.Join(keyDir, filepath.Base(b))
		}
		keyFiles = append(keyFiles, bases[i]+".key")
	}
	city, asn := geoPaths(t)
	zoneText := validatortest.LarkbookZone()
	cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
identity: steer-validators-test
zones:
  - origin: example.com
    file: example.com.zone
    dnssec: { keys: [%s] }
geo:
  databases: [%q, %q]
ecs: { enabled: true, max_source_v4: 28, max_source_v6: 56 }
records:
%s`, strings.Join(bases, ", "), city, asn, larkbookRecord)
	srv := servertest.Start(t, map[string]string{"steer.yaml": cfg, "example.com.zone": zoneText})

	anchor := validatortest.AnchorFromKeyFiles(t, "example.com", keyFiles...)
	// The DS for the parent, as steer dnssec ds prints it from the
	// configuration, is the anchor's.
	out, errOut, code := runSteer(t, "dnssec", "ds", "example.com", "--config", srv.ConfigPath)
	if code != 0 {
		t.Fatalf("steer dnssec ds: exit %d\n%s%s", code, out, errOut)
	}
	var want, got []string
	for _, ds := range anchor.DS() {
		ds.Digest = strings.ToUpper(ds.Digest)
		want = append(want, ds.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rr, err := dns.NewRR(l)
		if ds, ok := rr.(*dns.DS); err != nil || !ok {
			t.Errorf("steer dnssec ds printed %q, not a DS record (%v)", l, err)
		} else {
			ds.Hdr.Ttl = 0
			ds.Digest = strings.ToUpper(ds.Digest)
			got = append(got, ds.String())
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("steer dnssec ds printed\n%s\nwant the anchor's DS\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The server publishes the keys.
	served := validatortest.AnchorFromServer(t, srv.V4, "example.com")
	for _, k := range anchor.Keys {
		if !slices.ContainsFunc(served.Keys, func(s *dns.DNSKEY) bool { return s.PublicKey == k.PublicKey }) {
			t.Fatalf("the server's DNSKEY RRset lacks the SEP key %d", k.KeyTag())
		}
	}
	return srv, anchor, zoneText
}

// TestValidatorsCSK, and the two below with other keys, is issue 26's
// acceptance: Larkbook signed by steer, asked through every validator.
// delv validates every RRset of the zone and the DNSKEY, CDS and CDNSKEY
// at its apex, the steered name for every ECS case (through an ECS relay:
// delv sends none) with the right site, and proves 100 random
// nonexistent names, NODATA, the empty non-terminal; the wildcard's
// expansion validates. Unbound (subnet cache + validator, sending ECS)
// and PowerDNS Recursor (passing its clients' ECS on) return AD=1 and the
// right site for every ECS case and validate the same names; Knot
// Resolver (no ECS) validates them all and the steered name as 127.0.0.1
// gets it. dnsviz reports no error, warning or insecure status. Then,
// with the eu-central pool drained, a fresh Unbound and delv validate the
// other pool steer now gives Europe's clients.
func TestValidatorsCSK(t *testing.T) {
	t.Parallel()
	validateSigned(t, cskKeys, 100, true)
}

// TestValidatorsED25519 is TestValidatorsCSK with an Ed25519 KSK and ZSK
// (20 of the nonexistent names through delv, all 100 through the
// resolvers).
func TestValidatorsED25519(t *testing.T) {
	t.Parallel()
	validateSigned(t, ed25519Keys, 20, false)
}

// TestValidatorsRSAKSK is TestValidatorsCSK with an RSASHA256 KSK over an
// ECDSAP256SHA256 ZSK (20 of the nonexistent names through delv). dnsviz
// probes this one too: with two algorithms it reports an RRset without a
// signature of each (MISSING_RRSIG_FOR_ALG_DNSKEY, RFC 4035 §2.2), which
// the validators, taking one good path, let pass.
func TestValidatorsRSAKSK(t *testing.T) {
	t.Parallel()
	validateSigned(t, rsaKSKKeys, 20, true)
}

// validateSigned runs the acceptance for one key variant: delvNX of the
// 100 random nonexistent names go through delv too (each a process), all
// of them through the resolvers; dnsviz probes the zone when asked.
func validateSigned(t *testing.T, v keyVariant, delvNX int, dnsviz bool) {
	srv, anchor, zoneText := signedLarkbook(t, v)
	const origin = "example.com."

	// Every RRset of the zone and of its apex keys, and the wildcard's
	// expansion.
	var positive []validatortest.DelvQuery
	for _, q := range validatortest.RRsets(t, origin, zoneText) {
		if strings.HasPrefix(q.Name, "wildcard-expanded.") {
			continue // asked below, under its own check
		}
		positive = append(positive, q)
	}
	positive = append(positive,
		validatortest.DelvQuery{Name: origin, Qtype: dns.TypeDNSKEY},
		validatortest.DelvQuery{Name: origin, Qtype: dns.TypeCDS},
		validatortest.DelvQuery{Name: origin, Qtype: dns.TypeCDNSKEY},
	)
	wild := validatortest.DelvQuery{Name: fmt.Sprintf("w%08x.wild.example.com.", rand.Uint32()), Qtype: dns.TypeA}
	var nx []validatortest.DelvQuery
	for i := range 100 {
		nx = append(nx, validatortest.DelvQuery{Name: fmt.Sprintf("nx%d-%08x.example.com.", i, rand.Uint32()), Qtype: dns.TypeA})
	}
	nodata := []validatortest.DelvQuery{
		{Name: shop, Qtype: dns.TypeAAAA}, // the steered name has IPv4 pools only
		{Name: shop, Qtype: dns.TypeTXT},  // nor other types
		{Name: "static.example.com.", Qtype: dns.TypeMX},
		{Name: "_tcp.example.com.", Qtype: dns.TypeA}, // empty non-terminal
		{Name: "_tcp.example.com.", Qtype: dns.TypeSRV},
		{Name: "x.shop.example.com.", Qtype: dns.TypeA}, // below the steered name: nothing
	}
	isENT := func(name string) bool { return name == "_tcp.example.com." }

	var resolvers []*validatortest.Resolver
	resolvers = append(resolvers,
		validatortest.StartUnbound(t, srv.V4, anchor),
		validatortest.StartPDNSRecursor(t, srv.V4, anchor),
		validatortest.StartKresd(t, srv.V4, anchor))
	for _, r := range resolvers {
		t.Run(r.Name, func(t *testing.T) {
			what := func(q validatortest.DelvQuery) string {
				return fmt.Sprintf("%s %s %s", r.Name, q.Name, dns.TypeToString[q.Qtype])
			}
			for _, q := range append(positive, wild) {
				resp := r.Query(t, q.Name, q.Qtype, netip.Prefix{})
				validatortest.Validated(t, what(q), resp)
				if len(resp.Answer) == 0 {
					t.Errorf("%s: no answer\n%v", what(q), resp)
				}
			}
			rcodes := map[string]int{}
			for _, q := range append(nx, nodata...) {
				resp := r.Query(t, q.Name, q.Qtype, netip.Prefix{})
				if resp.AuthenticatedData {
					rcodes[dns.RcodeToString[resp.Rcode]]++
				}
				validatortest.Validated(t, what(q), resp)
				// Compact denial answers a nonexistent name NOERROR
				// (a resolver may turn the NXNAME proof back into
				// NXDOMAIN); NODATA and the empty non-terminal are
				// NOERROR.
				nodataCase := q.Qtype != dns.TypeA || isENT(q.Name)
				if len(answerOf(resp, q)) != 0 || nodataCase && resp.Rcode != dns.RcodeSuccess {
					t.Errorf("%s: want no answer (NXDOMAIN or NOERROR)\n%v", what(q), resp)
				}
			}
			t.Logf("%s: %s: %d answers AD=1; negative answers AD=1 by rcode: %v", v.name, r.Name, len(positive)+1, rcodes)
			if !r.ECS {
				// Knot Resolver sends no ECS, not even its client's: steer
				// sees 127.0.0.1, which the databases do not place: the
				// fallback's first pool, for a client in Berlin too.
				for _, ecs := range []string{"", berlinPfx} {
					var p netip.Prefix
					if ecs != "" {
						p = netip.MustParsePrefix(ecs)
					}
					resp := r.Query(t, shop, dns.TypeA, p)
					validatortest.Validated(t, r.Name+" shop A", resp)
					if got := addrs(resp, shop); len(got) != 1 || got[0] != apSouth {
						t.Errorf("%s shop A (client ECS %q): %v, want %s\n%v", r.Name, ecs, got, apSouth, resp)
					}
				}
				return
			}
			for _, c := range seedCases {
				resp := r.Query(t, shop, dns.TypeA, netip.MustParsePrefix(c.subnet))
				validatortest.Validated(t, fmt.Sprintf("%s %s (ECS %s)", r.Name, c.city, c.subnet), resp)
				if got := addrs(resp, shop); len(got) != 1 || !contains(c.want, got[0]) {
					t.Errorf("%s %s (ECS %s): %v, want one of %v\n%v", r.Name, c.city, c.subnet, got, c.want, resp)
				}
				// Through the CNAME as well.
				resp = r.Query(t, "www.example.com.", dns.TypeA, netip.MustParsePrefix(c.subnet))
				validatortest.Validated(t, fmt.Sprintf("%s www %s (ECS %s)", r.Name, c.city, c.subnet), resp)
				if got := addrs(resp, shop); len(got) != 1 || !contains(c.want, got[0]) {
					t.Errorf("%s www %s (ECS %s): %v, want one of %v\n%v", r.Name, c.city, c.subnet, got, c.want, resp)
				}
			}
		})
	}

	// delv (many processes) and dnsviz (mostly waiting on its probe) side
	// by side, after the resolvers.
	t.Run("delv and dnsviz", func(t *testing.T) {
		t.Run("delv", func(t *testing.T) {
			t.Parallel()
			d := validatortest.NewDelv(t, srv.V4, anchor)
			all := append(append(append(append([]validatortest.DelvQuery{}, positive...), wild), nx[:delvNX]...), nodata...)
			validated, negative := 0, 0
			for i, r := range d.All(all) {
				if r.Validated {
					validated++
				}
				if r.Negative {
					negative++
				}
				switch {
				case r.Err != nil && !strings.Contains(r.Out, "resolution failed"):
					t.Errorf("%v %s", r.Err, r)
				case i < len(positive)+1:
					if !r.Validated || len(r.Answer) == 0 {
						t.Errorf("want fully validated: %s", r)
					}
					if all[i] == wild && (len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.99") {
						t.Errorf("the wildcard's expansion: %s", r)
					}
				default:
					if !r.Negative {
						t.Errorf("want negative response, fully validated: %s", r)
					}
				}
			}
			// The steered name, for every ECS case: validated, and the site
			// steering gives that subnet.
			cases := seedCases
			jobs := make([]validatortest.DelvJob, len(cases))
			for i, c := range cases {
				relay := validatortest.ECSRelay(t, srv.V4, netip.MustParsePrefix(c.subnet))
				jobs[i] = validatortest.DelvJob{Delv: d.Via(relay), Query: validatortest.DelvQuery{Name: shop, Qtype: dns.TypeA}}
			}
			res := validatortest.RunDelv(jobs)
			for i, c := range cases {
				r := res[i]
				if r.Validated {
					validated++
				}
				if !r.Validated || len(r.Answer) != 1 || !contains(c.want, addrOf(r.Answer[0])) {
					t.Errorf("%s (ECS %s): want fully validated, one A in %v: %s", c.city, c.subnet, c.want, r)
				}
			}
			t.Logf("%s: delv: %d fully validated (%d RRsets, the wildcard, %d ECS cases of %s), %d negative responses fully validated (%d nonexistent names, %d NODATA/ENT)",
				v.name, validated, len(positive), len(cases), shop, negative, delvNX, len(nodata))
		})

		if dnsviz {
			t.Run("dnsviz", func(t *testing.T) {
				t.Parallel()
				rep := validatortest.Dnsviz(t, srv.V4, anchor, []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeSRV},
					"example.com", "shop.example.com", "www.example.com", "static.example.com", "mail.example.com",
					nx[0].Name, wild.Name, "_tcp.example.com", "_https._tcp.example.com")
				for name, p := range rep.Problems {
					t.Errorf("dnsviz: %s:\n\t%s", name, strings.Join(p, "\n\t"))
				}
				if len(rep.Problems) > 0 {
					t.Logf("dnsviz print:\n%s", rep.Text)
				}
			})
		}
	})

	// A health change: with eu-central drained, Europe's clients get
	// another pool; a fresh Unbound (no cached answer) and delv validate
	// what steer now answers them.
	t.Run("health", func(t *testing.T) {
		live := srv.Handler().Snapshot().Live
		drain := func(pool string) {
			live.SetHealth(func(netip.Addr, string) bool { return true }, func(_, p string) policy.PoolOverride {
				if p == pool {
					return policy.PoolDrain
				}
				return policy.PoolAuto
			})
		}
		drain("eu-central")
		t.Cleanup(func() { drain("") })
		unbound := validatortest.StartUnbound(t, srv.V4, anchor)
		d := validatortest.NewDelv(t, srv.V4, anchor)
		for _, c := range seedCases {
			if !slices.Contains(c.want, euCentral) {
				continue
			}
			direct, _ := exchangeRaw(t, srv.V4, ecsQuery(shop, dns.TypeA, c.subnet))
			want := addrs(direct, shop)
			if len(want) != 1 || want[0] == euCentral {
				t.Fatalf("%s with eu-central drained: steer answers %v\n%v", c.city, want, direct)
			}
			resp := unbound.Query(t, shop, dns.TypeA, netip.MustParsePrefix(c.subnet))
			validatortest.Validated(t, "unbound "+c.city+" with eu-central drained", resp)
			if got := addrs(resp, shop); len(got) != 1 || got[0] != want[0] {
				t.Errorf("unbound %s with eu-central drained: %v, want %v", c.city, got, want)
			}
			r := d.Via(validatortest.ECSRelay(t, srv.V4, netip.MustParsePrefix(c.subnet))).Query(shop, dns.TypeA)
			if !r.Validated || len(r.Answer) != 1 || addrOf(r.Answer[0]) != want[0] {
				t.Errorf("%s with eu-central drained: want fully validated %v: %s", c.city, want, r)
			}
		}
	})
}

// answerOf returns the records of resp's answer section owned by q's name
// with q's type.
func answerOf(resp *dns.Msg, q validatortest.DelvQuery) []dns.RR {
	var out []dns.RR
	for _, rr := range resp.Answer {
		if strings.EqualFold(rr.Header().Name, q.Name) && rr.Header().Rrtype == q.Qtype {
			out = append(out, rr)
		}
	}
	return out
}

// addrOf is an A or AAAA record's address, "" for any other record.
func addrOf(rr dns.RR) string {
	switch rr := rr.(type) {
	case *dns.A:
		return rr.A.String()
	case *dns.AAAA:
		return rr.AAAA.String()
	}
	return ""
}
