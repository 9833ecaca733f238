package zone_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/zone"
)

// mustParse parses a zone from text and fails the test on any error.
func mustParse(t testing.TB, origin, data string) (*zone.Zone, diag.Problems) {
	t.Helper()
	z, errs, warns := zone.Parse(nil, origin, origin+"zone", []byte(data))
	if len(errs) > 0 {
		t.Fatalf("parse %s: unexpected errors:\n%v", origin, errs)
	}
	if z == nil {
		t.Fatalf("parse %s: nil zone without errors", origin)
	}
	return z, warns
}

// mustSet parses origin/text pairs into a Set, requiring no warnings.
func mustSet(t testing.TB, pairs ...string) *zone.Set {
	t.Helper()
	var zs []*zone.Zone
	for i := 0; i+1 < len(pairs); i += 2 {
		z, warns := mustParse(t, pairs[i], pairs[i+1])
		if len(warns) > 0 {
			t.Fatalf("parse %s: unexpected warnings:\n%v", pairs[i], warns)
		}
		zs = append(zs, z)
	}
	return zone.NewSet(zs)
}

// rrStrings returns the String() form of each record.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

// normalize parses each expected record in master-file syntax and returns
// its String() form, so expectations can be written loosely.
func normalize(t testing.TB, want []string) []string {
	t.Helper()
	out := make([]string, len(want))
	for i, s := range want {
		rr, err := dns.NewRR(s)
		if err != nil || rr == nil {
			t.Fatalf("bad expected record %q: %v", s, err)
		}
		out[i] = rr.String()
	}
	return out
}

// checkSection compares a section with want. When ordered is false the
// order of records is ignored.
func checkSection(t testing.TB, section string, got []dns.RR, want []string, ordered bool) {
	t.Helper()
	g := rrStrings(got)
	w := normalize(t, want)
	if !ordered {
		slices.Sort(g)
		slices.Sort(w)
	}
	if !slices.Equal(g, w) {
		t.Errorf("%s section:\n got: %s\nwant: %s", section,
			"\n      "+strings.Join(g, "\n      "), "\n      "+strings.Join(w, "\n      "))
	}
}

// expect is the full expected outcome of one lookup.
type expect struct {
	rcode    int
	aa       bool
	referral bool
	zone     string // origin of Answer.Zone; "" means nil
	answer   []string
	ns       []string
	extra    []string
	// ordered makes the answer section order significant (CNAME chains).
	ordered bool
}

type lookupCase struct {
	name  string
	qname string
	qtype uint16
	want  expect
}

func runLookups(t *testing.T, s *zone.Set, cases []lookupCase) {
	t.Helper()
	for _, tc := range cases {
		name := tc.name
		if name == "" {
			name = tc.qname + "/" + dns.TypeToString[tc.qtype]
		}
		t.Run(name, func(t *testing.T) {
			checkAnswer(t, s.Lookup(tc.qname, tc.qtype), tc.want)
		})
	}
}

func checkAnswer(t testing.TB, a zone.Answer, w expect) {
	t.Helper()
	if a.Rcode != w.rcode {
		t.Errorf("rcode = %s, want %s", dns.RcodeToString[a.Rcode], dns.RcodeToString[w.rcode])
	}
	if a.Authoritative != w.aa {
		t.Errorf("Authoritative = %v, want %v", a.Authoritative, w.aa)
	}
	if a.Referral != w.referral {
		t.Errorf("Referral = %v, want %v", a.Referral, w.referral)
	}
	switch {
	case w.zone == "" && a.Zone != nil:
		t.Errorf("Zone = %s, want nil", a.Zone.Origin)
	case w.zone != "" && a.Zone == nil:
		t.Errorf("Zone = nil, want %s", w.zone)
	case w.zone != "" && a.Zone.Origin != w.zone:
		t.Errorf("Zone = %s, want %s", a.Zone.Origin, w.zone)
	}
	checkSection(t, "answer", a.Answer, w.answer, w.ordered)
	checkSection(t, "authority", a.Ns, w.ns, false)
	checkSection(t, "additional", a.Extra, w.extra, false)
}

// hasProblem reports whether ps holds a problem at file:line whose message
// contains phrase.
func hasProblem(ps diag.Problems, file string, line int, phrase string) bool {
	for _, p := range ps {
		if p.File == file && p.Line == line && strings.Contains(p.Msg, phrase) {
			return true
		}
	}
	return false
}
