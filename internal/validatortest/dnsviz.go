package validatortest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// DnsvizReport is dnsviz's text report (dnsviz print) of a probe.
type DnsvizReport struct {
	Text string
	// Problems are the report's lines that carry an error (E:), a
	// warning (W:) or a status other than secure ([.]), by the name
	// (section of the report) they are under.
	Problems map[string][]string
}

var dnsvizStatus = regexp.MustCompile(`\[[^\]]*\]`)

// Dnsviz probes names at server as the authoritative servers of the
// anchor's zone (dnsviz probe -A with the explicit delegation
// ZONE+:NS=ADDR:PORT, so nothing above the zone is queried), over IPv4,
// for rdtypes, then prints the analysis with the anchor as the trusted
// key (dnsviz print -t), and grok's errors and warnings (dnsviz grok -l
// warning, without the key: grok -t is broken, see below). dnsviz also queries every name server it finds in
// the zone's NS RRset, at the addresses the zone gives them: the test
// fails unless each is the server's address, so the probe stays on
// loopback. (Debian's dnsviz 0.9.4 grok exits with "pygraphviz is required"
// whenever a trusted key is given, as its pygraphviz 1.7 has no release
// module; print reads the version the newer way.)
func Dnsviz(t testing.TB, server netip.AddrPort, a Anchor, rdtypes []uint16, names ...string) DnsvizReport {
	t.Helper()
	dnstest.NeedTool(t, "dnsviz")
	ns := nsOnLoopback(t, server, a.Zone)
	dir := t.TempDir()
	var tk strings.Builder
	for _, k := range a.Keys {
		tk.WriteString(k.String() + "\n")
	}
	anchor := writeFile(t, dir, "trusted-keys", tk.String())
	var types []string
	for _, ty := range rdtypes {
		types = append(types, dns.TypeToString[ty])
	}
	probe := filepath.Join(dir, "probe.json")
	args := []string{"probe", "-4", "-A", "-x", fmt.Sprintf("%s+:%s=%s", a.Zone, ns, server),
		"-R", strings.Join(types, ","), "-o", probe}
	args = append(args, names...)
	if out, err := runTool(3*time.Minute, "dnsviz", args...); err != nil {
		t.Fatalf("dnsviz %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := runTool(time.Minute, "dnsviz", "print", "-t", anchor, "-r", probe)
	if err != nil {
		t.Fatalf("dnsviz print: %v\n%s", err, out)
	}
	rep := DnsvizReport{Text: out, Problems: map[string][]string{}}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		if line != "" && line[0] != ' ' {
			name = dns.CanonicalName(strings.Fields(line)[0])
		}
		bad := strings.Contains(line, "E:") || strings.Contains(line, "W:")
		for _, s := range dnsvizStatus.FindAllString(line, -1) {
			if s != "[.]" {
				bad = true
			}
		}
		if bad {
			rep.Problems[name] = append(rep.Problems[name], strings.TrimSpace(line))
		}
	}
	out, err = runTool(time.Minute, "dnsviz", "grok", "-l", "warning", "-r", probe)
	if err != nil {
		t.Fatalf("dnsviz grok: %v\n%s", err, out)
	}
	if strings.TrimSpace(out) != "" {
		var names map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &names); err != nil {
			t.Fatalf("dnsviz grok: %v\n%s", err, out)
		}
		for name, v := range names {
			rep.Problems[dns.CanonicalName(name)] = append(rep.Problems[dns.CanonicalName(name)], "grok: "+string(v))
		}
	}
	return rep
}

// nsOnLoopback returns the first name server of zone, after checking
// that every name server's address records in the zone are the server's
// address.
func nsOnLoopback(t testing.TB, server netip.AddrPort, zone string) string {
	t.Helper()
	q := func(name string, qtype uint16) []dns.RR {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.RecursionDesired = false
		return dnstest.Exchange(t, "tcp", server, m).Answer
	}
	var first string
	for _, rr := range q(zone, dns.TypeNS) {
		ns, ok := rr.(*dns.NS)
		if !ok {
			continue
		}
		if first == "" {
			first = ns.Ns
		}
		for _, a := range q(ns.Ns, dns.TypeA) {
			if a, ok := a.(*dns.A); ok && a.A.String() != server.Addr().String() {
				t.Fatalf("dnsviz would query %s at %s: the zone's name servers must have the server's address (%s)", ns.Ns, a.A, server.Addr())
			}
		}
	}
	if first == "" {
		t.Fatalf("%s has no NS records", zone)
	}
	return first
}
