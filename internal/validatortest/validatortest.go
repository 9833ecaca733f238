// Package validatortest runs real DNSSEC validators against an
// authoritative server on loopback, so tests can prove that what the
// server signs validates: delv (BIND 9.18), Unbound with its subnet cache
// and validator sending ECS, PowerDNS Recursor 4.8 passing its clients'
// ECS on, Knot Resolver 5.6 (which cannot send ECS), and dnsviz
// (probe, then print with the trust anchor).
//
// Every validator is configured with one trust anchor, the zone's SEP
// DNSKEYs (or their DS), and sends queries for the zone to the server
// under test only. None of them may reach beyond loopback: the recursive
// resolvers send from 127.0.0.1 only and are told never to query anything
// else, and dnsviz is given an explicit delegation (its NS names must
// resolve, in the zone, to the server's address: dnsviz queries every
// name server it learns).
//
// Each resolver is started once per test (its own configuration in a
// temporary directory, a free port) and stopped by its PID when the test
// ends; a test then queries it many times. delv is one process per query:
// Delv.All runs a batch of them a few at a time.
package validatortest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// Anchor is a zone's trust anchor: its SEP (flag 257) DNSKEYs.
type Anchor struct {
	Zone string // canonical, with the final dot
	Keys []*dns.DNSKEY
}

// NewAnchor returns the anchor of zone: the SEP keys among keys (records
// of other types or owners are ignored). It fails the test when there is
// none.
func NewAnchor(t testing.TB, zone string, keys []dns.RR) Anchor {
	t.Helper()
	a := Anchor{Zone: dns.CanonicalName(zone)}
	for _, rr := range keys {
		k, ok := rr.(*dns.DNSKEY)
		if !ok || !strings.EqualFold(k.Hdr.Name, a.Zone) || k.Flags&dns.SEP == 0 || k.Flags&dns.REVOKE != 0 {
			continue
		}
		a.Keys = append(a.Keys, k)
	}
	if len(a.Keys) == 0 {
		t.Fatalf("no SEP DNSKEY for %s among %d records", a.Zone, len(keys))
	}
	return a
}

// AnchorFromServer asks server for zone's DNSKEY RRset (over TCP) and
// returns its SEP keys as the anchor.
func AnchorFromServer(t testing.TB, server netip.AddrPort, zone string) Anchor {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.CanonicalName(zone), dns.TypeDNSKEY)
	m.RecursionDesired = false
	m.SetEdns0(1232, true)
	// The first query to a server just started: under the race detector
	// on a loaded machine (three signed servers starting at once) it has
	// taken longer than dnstest.Exchange's 3 s, so allow 15.
	c := &dns.Client{Net: "tcp", Timeout: 15 * time.Second}
	r, _, err := c.Exchange(m, server.String())
	if err != nil {
		t.Fatalf("tcp %s DNSKEY: %v", zone, err)
	}
	return NewAnchor(t, zone, r.Answer)
}

// AnchorFromKeyFiles reads BIND .key files (K<zone>+<alg>+<tag>.key).
func AnchorFromKeyFiles(t testing.TB, zone string, files ...string) Anchor {
	t.Helper()
	var rrs []dns.RR
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		zp := dns.NewZoneParser(strings.NewReader(string(b)), "", f)
		for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
			rrs = append(rrs, rr)
		}
		if err := zp.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return NewAnchor(t, zone, rrs)
}

// DS returns the anchor's keys as SHA-256 DS records.
func (a Anchor) DS() []*dns.DS {
	out := make([]*dns.DS, 0, len(a.Keys))
	for _, k := range a.Keys {
		out = append(out, k.ToDS(dns.SHA256))
	}
	return out
}

// dsRdata is a DS record's RDATA in presentation form.
func dsRdata(d *dns.DS) string {
	return fmt.Sprintf("%d %d %d %s", d.KeyTag, d.Algorithm, d.DigestType, strings.ToUpper(d.Digest))
}

// notLoopbackV4 covers every IPv4 address outside 127.0.0.0/8: the
// resolvers are told never to query these (the server under test is on
// loopback, and nothing else may be queried from a test).
var notLoopbackV4 = []string{"0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/4", "112.0.0.0/5", "120.0.0.0/6",
	"124.0.0.0/7", "126.0.0.0/8", "128.0.0.0/1"}

// process is a started validator daemon.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *dnstest.LockedBuffer
	done chan struct{}
}

// startProcess runs args in dir (in a process group of its own) until the
// test ends, then stops it by its PID: SIGTERM, SIGKILL after 5 s. The
// log is printed when the test failed.
func startProcess(t testing.TB, name, dir string, args ...string) *process {
	t.Helper()
	dnstest.NeedTool(t, args[0])
	p := &process{name: name, log: &dnstest.LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.log.String())
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// writeFile writes body to dir/name and returns the path.
func writeFile(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// RRsets returns a query for every RRset of a zone file's text (origin
// $ORIGIN): each owner and type once, in the file's order. A wildcard
// owner is asked as "wildcard-expanded" under it instead.
func RRsets(t testing.TB, origin, text string) []DelvQuery {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(text), dns.CanonicalName(origin), "")
	seen := map[DelvQuery]bool{}
	var out []DelvQuery
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		if strings.HasPrefix(name, "*.") {
			name = "wildcard-expanded" + name[1:]
		}
		q := DelvQuery{Name: name, Qtype: h.Rrtype}
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("zone %s: %v", origin, err)
	}
	return out
}

// LarkbookZone returns the demo's zone file (Larkbook's example.com, see
// internal/config/demo) made ready for validation on loopback: its name
// servers' addresses are 127.0.0.1 (dnsviz queries the name servers the
// zone names) and it gains a wildcard, *.wild.example.com A 192.0.2.99,
// so a wildcard-expanded answer can be validated. Its empty non-terminal
// is _tcp.example.com (under _https._tcp).
func LarkbookZone() string {
	b, err := os.ReadFile(dnstest.RepoFile("internal/config/demo/zones/example.com.zone"))
	if err != nil {
		panic("validatortest: " + err.Error())
	}
	text := string(b)
	for _, r := range [][2]string{
		{"ns1     IN A    192.0.2.53\n", "ns1     IN A    127.0.0.1\n"},
		{"ns2     IN A    198.51.100.53\n", "ns2     IN A    127.0.0.1\n"},
		{"        IN AAAA 2001:db8::53\n", ""},
	} {
		if !strings.Contains(text, r[0]) {
			panic(fmt.Sprintf("validatortest: the demo zone has no line %q any more", r[0]))
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	return text + "*.wild  IN A    192.0.2.99\n"
}
