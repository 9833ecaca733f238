package difftest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// reply is an answer reduced to what the test compares: the rcode
// (extended by the OPT record), AA and TC, and the three sections as sets
// of RRsets, TTLs included and order ignored. Owner names are compared
// without case (RFC 4343: servers may answer in the case of the question
// or of the zone). A truncated UDP answer is compared by its header only:
// the client must ask again over TCP (RFC 2181 §9), and what a truncated
// answer holds is the server's choice.
type reply struct {
	rcode    int
	aa, tc   bool
	sections [3][]string
	err      string // no answer at all
}

func reduce(m *dns.Msg, err error) reply {
	if err != nil {
		return reply{err: err.Error()}
	}
	r := reply{rcode: m.Rcode, aa: m.Authoritative, tc: m.Truncated}
	if r.tc {
		return r
	}
	for i, sec := range [3][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			r.sections[i] = append(r.sections[i], rrText(rr))
		}
		slices.Sort(r.sections[i])
	}
	return r
}

// rrText is an RR in presentation form with its owner and the domain
// names in its data in lower case. Case in names is not data (RFC 4343
// §3): a server that compresses a name into the question's spelling
// answers in the question's case, one that does not in the zone's.
func rrText(rr dns.RR) string {
	rr = dns.Copy(rr)
	rr.Header().Name = strings.ToLower(rr.Header().Name)
	v := reflect.ValueOf(rr).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch v.Type().Field(i).Tag.Get("dns") {
		case "domain-name", "cdomain-name":
			if f := v.Field(i); f.Kind() == reflect.String {
				f.SetString(strings.ToLower(f.String()))
			}
		}
	}
	return rr.String()
}

func (r reply) equal(o reply) bool {
	if r.err != "" || o.err != "" {
		return r.err != "" && o.err != ""
	}
	if r.rcode != o.rcode || r.aa != o.aa || r.tc != o.tc {
		return false
	}
	for i := range r.sections {
		if !slices.Equal(r.sections[i], o.sections[i]) {
			return false
		}
	}
	return true
}

func (r reply) String() string {
	if r.err != "" {
		return "  (no answer: " + r.err + ")\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %s aa=%v tc=%v\n", dns.RcodeToString[r.rcode], r.aa, r.tc)
	for i, name := range []string{"answer", "authority", "additional"} {
		for _, l := range r.sections[i] {
			fmt.Fprintf(&b, "  %-10s %s\n", name, l)
		}
	}
	return b.String()
}
