//go:build !race

package zone_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/validatortest"
	"github.com/steer-dns/steer/internal/zone"
)

// TestPresignedDelv has delv (BIND 9.18) validate a zone BIND signed,
// served by steer with no key: every RRset, NODATA at a name, an empty
// non-terminal, a wildcard and a DS-less delegation, and 100 names that
// do not exist (20 for each chain), for NSEC, NSEC3 and NSEC3 with
// opt-out. Under opt-out the NSEC3 that covers a wildcard answer's next
// closer name has the Opt-Out bit, so validators take that answer as
// insecure (RFC 5155 §8.8; BIND serving the file answers the same): delv
// says "unsigned answer", not bogus.
func TestPresignedDelv(t *testing.T) {
	t.Parallel()
	var jobs []validatortest.DelvJob
	var negative, insecure []bool
	for v, args := range [][]string{nil, {"-3", "-", "-H", "0"}, {"-3", "abcd", "-H", "2", "-A"}} {
		text, ksk := signBIND(t, preText, args...)
		z, _ := mustParse(t, "pre.test.", text)
		set := zone.NewSet([]*zone.Zone{z})
		set.Precompile()
		addr := netip.MustParseAddrPort(serveZone(t, set))
		d := validatortest.NewDelv(t, addr, validatortest.NewAnchor(t, "pre.test.", []dns.RR{ksk}))
		for _, q := range validatortest.RRsets(t, "pre.test.", preText) {
			if q.Name == "ns.sub.pre.test." || q.Name == "ns.insecure.pre.test." || q.Qtype == dns.TypeNS && q.Name != "pre.test." {
				continue // glue and delegations: the child's
			}
			jobs = append(jobs, validatortest.DelvJob{Delv: d, Query: q})
			negative = append(negative, false)
			insecure = append(insecure, v == 2 && strings.HasPrefix(q.Name, "wildcard-expanded."))
		}
		for _, q := range []validatortest.DelvQuery{
			{Name: "www.pre.test.", Qtype: dns.TypeMX}, {Name: "a.ent.pre.test.", Qtype: dns.TypeA},
			{Name: "x.wild.pre.test.", Qtype: dns.TypeMX}, {Name: "insecure.pre.test.", Qtype: dns.TypeDS},
			{Name: "pre.test.", Qtype: dns.TypeCDS},
		} {
			jobs = append(jobs, validatortest.DelvJob{Delv: d, Query: q})
			negative = append(negative, true)
			insecure = append(insecure, false)
		}
		for i := range 20 {
			name := fmt.Sprintf("nx%d.pre.test.", i)
			if i%4 == 1 {
				name = fmt.Sprintf("nx%d.a.ent.pre.test.", i)
			}
			jobs = append(jobs, validatortest.DelvJob{Delv: d, Query: validatortest.DelvQuery{Name: name, Qtype: dns.TypeA}})
			negative = append(negative, true)
			insecure = append(insecure, false)
		}
	}
	for i, r := range validatortest.RunDelv(jobs) {
		if insecure[i] {
			if !strings.Contains(r.Out, "; unsigned answer") || r.Validated {
				t.Errorf("want insecure (opt-out): %s", r)
			}
			continue
		}
		if negative[i] && !r.Negative || !negative[i] && !r.Validated {
			t.Errorf("want validated (negative %v): %s", negative[i], r)
		}
	}
}
