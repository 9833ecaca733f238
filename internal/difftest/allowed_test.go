package difftest

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Where Knot and NSD disagree because the RFCs leave room, steer passes
// when it gives the answer it documents (README, "Answers"):
//
//   - It follows a CNAME chain into every zone it serves (RFC 1034 §4.3.2
//     step 3a restarts the lookup at the target; NSD and BIND do, Knot 3.2
//     stops at its zone's edge), and answers with minimal responses
//     (RFC 1034 §4.3.2 step 6 and RFC 2181 §9 leave the authority NS and
//     their addresses to the server; Knot leaves them out, NSD adds
//     them). So steer's answer is NSD's without the authority NS RRset
//     and the addresses only it needed: minimalNSD.
//   - It follows at most 12 CNAME or DNAME links (RFC 1034 §3.6.2 and
//     RFC 1035 §7.1 bound chains without saying where: Knot stops after
//     5, NSD runs an 18-link loop round once): chainPrefix.
//
// What is left is the allow list: each entry is a difference from both
// references that an RFC allows and steer chooses, with its section.

// allowed is one difference from both references that steer keeps.
type allowed struct {
	// why names the difference and the RFC section that allows it.
	why string
	// match reports whether a result is this difference.
	match func(r result) bool
}

var allowList = []allowed{
	{
		why: "SVCB ServiceMode with TargetName \".\": the owner's own A/AAAA are added (RFC 9460 §2.5.2 makes the owner the target, §4.1 says SHOULD add the target's addresses; PowerDNS's own svcb-servicemode test expects them; Knot 3.2 and NSD 4.6 add none)",
		match: func(r result) bool {
			owner := strings.ToLower(r.q.name)
			dot := slices.ContainsFunc(r.steer.sections[0], func(s string) bool {
				f := strings.Fields(s)
				return (f[3] == "SVCB" || f[3] == "HTTPS") && f[4] != "0" && f[5] == "."
			})
			without := r.steer
			without.sections[2] = slices.DeleteFunc(slices.Clone(r.steer.sections[2]), func(s string) bool {
				f := strings.Fields(s)
				return f[0] == owner && (f[3] == "A" || f[3] == "AAAA")
			})
			return dot && len(without.sections[2]) < len(r.steer.sections[2]) && without.equal(r.knot)
		},
	},
}

// documented reports whether steer gave the answer it documents where the
// references disagree, and which rule it was.
func documented(r result) string {
	if m, ok := minimalNSD(r.nsd, r.q); ok && m.equal(r.steer) {
		return "NSD's answer, with minimal responses"
	}
	if chainPrefix(r) {
		return "a CNAME chain cut at steer's 12 links"
	}
	return ""
}

// minimalNSD is NSD's answer without what minimal responses leave out:
// in a positive answer, the authority NS RRset and the addresses in the
// additional section that only those NS needed.
func minimalNSD(n reply, q question) (reply, bool) {
	if n.err != "" || n.tc || n.rcode != dns.RcodeSuccess || len(n.sections[0]) == 0 || len(n.sections[1]) == 0 {
		return n, false
	}
	var ns []string
	auth := n.sections[1][:0:0]
	for _, s := range n.sections[1] {
		if f := strings.Split(s, "\t"); len(f) == 5 && f[3] == "NS" {
			ns = append(ns, strings.ToLower(f[4]))
			continue
		}
		if covers(s, "NS") {
			continue // the NS RRset's signature goes with it
		}
		auth = append(auth, s)
	}
	if len(ns) == 0 {
		return n, false
	}
	// Names the answer section itself needs addresses for.
	needed := map[string]bool{}
	for _, s := range n.sections[0] {
		f := strings.Split(s, "\t")
		if len(f) < 5 {
			continue
		}
		fields := strings.Fields(f[4])
		switch f[3] {
		case "NS", "MX", "SRV", "SVCB", "HTTPS", "NAPTR", "RT", "KX", "AFSDB":
			needed[strings.ToLower(fields[len(fields)-1])] = true
		}
	}
	m := n
	m.sections[1] = auth
	m.sections[2] = slices.DeleteFunc(slices.Clone(n.sections[2]), func(s string) bool {
		f := strings.Split(s, "\t")
		address := len(f) == 5 && (f[3] == "A" || f[3] == "AAAA" || covers(s, "A") || covers(s, "AAAA"))
		return address && slices.Contains(ns, f[0]) && !needed[f[0]]
	})
	return m, true
}

// covers reports whether the record s (rrText) is an RRSIG over type t:
// with DO, an RRset minimal responses leave out takes its signatures
// with it.
func covers(s, t string) bool {
	f := strings.Split(s, "\t")
	return len(f) == 5 && f[3] == "RRSIG" && strings.HasPrefix(f[4], t+" ")
}

// chainPrefix reports whether all three answers are the same CNAME chain
// from the question's name, cut at different lengths, steer's at 12.
func chainPrefix(r result) bool {
	chains := [3][]string{}
	for i, a := range []reply{r.steer, r.knot, r.nsd} {
		if a.err != "" || a.rcode != dns.RcodeSuccess || a.tc {
			return false
		}
		c, ok := chain(a, r.q.name)
		if !ok {
			return false
		}
		chains[i] = c
	}
	if len(chains[0]) != 12 {
		return false
	}
	longest := slices.MaxFunc(chains[:], func(a, b []string) int { return len(a) - len(b) })
	for _, c := range chains {
		if !slices.Equal(c, longest[:len(c)]) {
			return false
		}
	}
	return true
}

// chain orders an answer made only of CNAMEs as links from name.
func chain(a reply, name string) ([]string, bool) {
	next := map[string]string{}
	for _, s := range a.sections[0] {
		f := strings.Split(s, "\t")
		if len(f) != 5 || f[3] != "CNAME" {
			return nil, false
		}
		next[f[0]] = s
	}
	var out []string
	at := strings.ToLower(name)
	for range len(next) {
		s, ok := next[at]
		if !ok {
			break
		}
		out = append(out, s)
		at = strings.ToLower(strings.Split(s, "\t")[4])
	}
	return out, len(out) == len(next)
}

// allow says why a difference from both references is allowed, or "".
func allow(r result) string {
	if d := documented(r); d != "" {
		return "documented: " + d
	}
	for _, a := range allowList {
		if a.match(r) {
			return "allowed: " + a.why
		}
	}
	return ""
}
