package validatortest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// Resolver is a running validating recursive resolver that sends every
// query for the anchor's zone to the server under test.
type Resolver struct {
	// Name is "unbound", "pdns_recursor" or "kresd".
	Name string
	// Addr is where it answers, over UDP and TCP.
	Addr netip.AddrPort
	// ECS tells whether it passes its clients' ECS option on to the
	// server (Knot Resolver 5 has no ECS support at all).
	ECS bool
	p   *process
}

// Log returns what the resolver has logged so far.
func (r *Resolver) Log() string { return r.p.log.String() }

// Query asks the resolver name/qtype with RD and DO set, and with an ECS
// option for ecs when it is valid. It retries over TCP when the UDP
// answer is truncated.
func (r *Resolver) Query(t testing.TB, name string, qtype uint16, ecs netip.Prefix) *dns.Msg {
	t.Helper()
	m, err := r.exchange(name, qtype, ecs)
	if err != nil {
		t.Fatalf("%s: %s %s (ECS %v): %v", r.Name, name, dns.TypeToString[qtype], ecs, err)
	}
	return m
}

func (r *Resolver) exchange(name string, qtype uint16, ecs netip.Prefix) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.CanonicalName(name), qtype)
	m.RecursionDesired = true
	m.SetEdns0(1232, true)
	if ecs.IsValid() {
		fam := uint16(1)
		if ecs.Addr().Is6() {
			fam = 2
		}
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam,
			SourceNetmask: uint8(ecs.Bits()), Address: net.IP(ecs.Masked().Addr().AsSlice())})
	}
	var last error
	for _, network := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 1232}
		resp, _, err := c.Exchange(m, r.Addr.String())
		if err != nil {
			last = err
			continue
		}
		if resp.Truncated && network == "udp" {
			continue
		}
		return resp, nil
	}
	return nil, last
}

// Validated fails the test unless resp is a NOERROR or NXDOMAIN answer
// with AD set: the resolver validated it.
func Validated(t testing.TB, who string, resp *dns.Msg) {
	t.Helper()
	if (resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError) || !resp.AuthenticatedData {
		t.Errorf("%s: rcode %s AD %v, want a validated answer (AD=1)\n%v", who, dns.RcodeToString[resp.Rcode], resp.AuthenticatedData, resp)
	}
}

// waitReady waits (at most 15 s) until the resolver answers the zone's SOA
// validated, so the server, the anchor and the resolver all work.
func (r *Resolver) waitReady(t testing.TB, zone string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for {
		if r.p.exited() {
			t.Fatalf("%s exited:\n%s", r.Name, r.Log())
		}
		resp, err := r.exchange(zone, dns.TypeSOA, netip.Prefix{})
		if err == nil && resp.Rcode == dns.RcodeSuccess && resp.AuthenticatedData {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("rcode %s AD %v", dns.RcodeToString[resp.Rcode], resp.AuthenticatedData)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not validate %s SOA in 15s (last: %s):\n%s", r.Name, zone, last, r.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// UnboundConf is the configuration of an Unbound on 127.0.0.1:port,
// working in dir, with module-config modules, that resolves zone through
// the stub server and sends it ECS (send-client-subnet; up to /32 and
// /56, so the server sees the client's subnet as the client sent it);
// extra is added, as lines, to its server clause.
func UnboundConf(port int, dir, modules, zone string, server netip.AddrPort, extra string) string {
	return fmt.Sprintf(`server:
	interface: 127.0.0.1
	port: %d
	do-ip6: no
	do-daemonize: no
	username: ""
	chroot: ""
	pidfile: ""
	directory: %q
	use-syslog: no
	logfile: ""
	verbosity: 1
	num-threads: 1
	so-reuseport: no
	outgoing-range: 64
	num-queries-per-thread: 64
	access-control: 127.0.0.0/8 allow
	outgoing-interface: 127.0.0.1
	do-not-query-localhost: no
	qname-minimisation: no
	infra-keep-probing: yes
	module-config: %q
	send-client-subnet: %s
	max-client-subnet-ipv4: 32
	max-client-subnet-ipv6: 56
%sremote-control:
	control-enable: no
stub-zone:
	name: %q
	stub-addr: %s@%d
`, port, dir, modules, server.Addr(), extra, zone, server.Addr(), server.Port())
}

// StartUnbound runs Unbound with `module-config: "subnetcache validator
// iterator"`: the anchor as its trust anchor, the zone a stub zone served
// by server, and ECS sent to it (the client's own, or the client's
// address when it sends none; up to /32 and /56, so the server sees the
// client's subnet as the client sent it).
func StartUnbound(t testing.TB, server netip.AddrPort, a Anchor) *Resolver {
	t.Helper()
	dnstest.NeedTool(t, "unbound-checkconf")
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	var extra strings.Builder
	extra.WriteString("\tval-log-level: 2\n")
	for _, p := range notLoopbackV4 {
		fmt.Fprintf(&extra, "\tdo-not-query-address: %s\n", p)
	}
	extra.WriteString("\tdo-not-query-address: ::/0\n")
	for _, k := range a.Keys {
		fmt.Fprintf(&extra, "\ttrust-anchor: \"%s IN DNSKEY %d %d %d %s\"\n", a.Zone, k.Flags, k.Protocol, k.Algorithm, k.PublicKey)
	}
	text := UnboundConf(port, dir, "subnetcache validator iterator", a.Zone, server, extra.String())
	conf := writeFile(t, dir, "unbound.conf", text)
	if out, err := runTool(30*time.Second, "unbound-checkconf", conf); err != nil {
		t.Fatalf("unbound-checkconf: %v\n%s\n%s", err, out, text)
	}
	r := &Resolver{Name: "unbound", Addr: loopback(port), ECS: true}
	r.p = startProcess(t, "unbound", dir, "unbound", "-d", "-c", conf)
	r.waitReady(t, a.Zone)
	return r
}

// StartPDNSRecursor runs PowerDNS Recursor with dnssec=validate, the
// anchor's DS added in its Lua configuration (addTA), the zone forwarded
// (forward-zones, RD clear) to server, and the clients' ECS passed on
// (use-incoming-edns-subnet, edns-subnet-allow-list; up to /32 and /56).
func StartPDNSRecursor(t testing.TB, server netip.AddrPort, a Anchor) *Resolver {
	t.Helper()
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	var lua strings.Builder
	for _, ds := range a.DS() {
		fmt.Fprintf(&lua, "addTA(%q, %q)\n", a.Zone, dsRdata(ds))
	}
	luaFile := writeFile(t, dir, "recursor.lua", lua.String())
	// A loaded test machine may make the server slow to answer once: no
	// SERVFAIL is cached and the server is never throttled as down.
	// dont-query lists every address but loopback; query-local-address
	// 127.0.0.1 could not reach anything else anyway. The root hints are
	// a loopback address nothing serves, so priming stays on loopback.
	hints := writeFile(t, dir, "root.hints", ". 3600000 NS a.root.invalid.\na.root.invalid. 3600000 A 127.0.0.1\n")
	conf := fmt.Sprintf(`local-address=127.0.0.1
local-port=%d
socket-dir=%s
daemon=no
write-pid=no
threads=1
pdns-distributes-queries=no
allow-from=127.0.0.0/8
query-local-address=127.0.0.1
dont-query=%s, ::/0
hint-file=%s
forward-zones=%s=%s
dnssec=validate
dnssec-log-bogus=yes
packetcache-servfail-ttl=0
server-down-max-fails=0
network-timeout=3000
security-poll-suffix=
lua-config-file=%s
edns-subnet-allow-list=%s
use-incoming-edns-subnet=yes
ecs-ipv4-bits=32
ecs-ipv6-bits=56
loglevel=5
quiet=yes
`, port, dir, strings.Join(notLoopbackV4, ", "), hints, strings.TrimSuffix(a.Zone, "."), server, luaFile, strings.TrimSuffix(a.Zone, "."))
	writeFile(t, dir, "recursor.conf", conf)
	r := &Resolver{Name: "pdns_recursor", Addr: loopback(port), ECS: true}
	r.p = startProcess(t, "pdns_recursor", dir, "pdns_recursor", "--config-dir="+dir)
	r.waitReady(t, a.Zone)
	return r
}

// StartKresd runs Knot Resolver with the anchor's DS (trust_anchors.add,
// the root's anchor removed) and the zone forwarded to server with
// policy.FORWARD, which validates (policy.STUB does not: it passes a bad
// signature on as an answer). Knot Resolver 5 sends no ECS, so the server
// sees 127.0.0.1 as the client.
func StartKresd(t testing.TB, server netip.AddrPort, a Anchor) *Resolver {
	t.Helper()
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	var b strings.Builder
	fmt.Fprintf(&b, "net.listen('127.0.0.1', %d, { kind = 'dns' })\n", port)
	b.WriteString("net.outgoing_v4('127.0.0.1')\nnet.ipv6 = false\n")
	// No root priming, time-skew check or other query beyond the zone.
	b.WriteString("modules.unload('priming')\nmodules.unload('detect_time_skew')\n")
	b.WriteString("trust_anchors.remove('.')\n")
	for _, ds := range a.DS() {
		fmt.Fprintf(&b, "trust_anchors.add('%s')\n", ds.String())
	}
	fmt.Fprintf(&b, "policy.add(policy.suffix(policy.FORWARD('%s@%d'), {todname('%s')}))\n", server.Addr(), server.Port(), a.Zone)
	b.WriteString("policy.add(policy.all(policy.REFUSE))\n")
	conf := writeFile(t, dir, "kresd.conf", b.String())
	r := &Resolver{Name: "kresd", Addr: loopback(port)}
	r.p = startProcess(t, "kresd", dir, "kresd", "-n", "-q", "-c", conf, dir)
	r.waitReady(t, a.Zone)
	return r
}

func loopback(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}
