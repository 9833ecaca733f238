package dnssec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// This file checks a zone's delegation: what DS RRset a server of the
// parent zone publishes for it (ParentDS), and how that set compares with
// the zone's SEP keys (CheckDS): which DS names which key, which key the
// parent should point at and does not, and which DS points at no key the
// zone publishes. steer dnssec ds-check prints it, and a KSK rollover is
// completed only when the parent names the new KSK.

// ParentAnswer is the DS RRset a parent server gave for a zone.
type ParentAnswer struct {
	// Server is the address asked (host:port) and Net the transport the
	// answer came over ("udp", or "tcp" after a truncated one).
	Server, Net string
	// DS is the zone's DS RRset (empty: the delegation is unsigned), TTL
	// its TTL.
	DS  []*dns.DS
	TTL uint32
}

// ParentServer turns ADDR[:PORT] (an IP address, [v6]:port, or
// host:port) into host:port, port 53 when none is given.
func ParentServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("no parent server address")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.String(), nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, ":") {
			return "", fmt.Errorf("%q is not ADDR[:PORT]", s)
		}
		host, port = s, "53"
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return "", fmt.Errorf("%q: port %q is not a port number", s, port)
	}
	if host == "" {
		return "", fmt.Errorf("%q has no host", s)
	}
	return net.JoinHostPort(host, port), nil
}

// ParentDS asks server (host:port) for zone's DS RRset, over UDP with the
// DO bit and without recursion, again over TCP when the answer is
// truncated (tcp asks over TCP alone), within timeout. The server must
// answer with authority (it serves the parent zone): a referral, a
// refusal, a name error or an answer without authority is an error
// saying so. An authoritative answer with no DS is an unsigned delegation.
func ParentDS(ctx context.Context, zone, server string, tcp bool, timeout time.Duration) (ParentAnswer, error) {
	zone = dns.CanonicalName(zone)
	ans := ParentAnswer{Server: server, Net: "udp"}
	if tcp {
		ans.Net = "tcp"
	}
	m := new(dns.Msg)
	m.SetQuestion(zone, dns.TypeDS)
	m.RecursionDesired = false
	m.SetEdns0(4096, true)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r *dns.Msg
	for {
		c := &dns.Client{Net: ans.Net, Timeout: timeout}
		var err error
		r, _, err = c.ExchangeContext(ctx, m, server)
		if err != nil {
			return ans, fmt.Errorf("asking %s for the DS of %s over %s: %v", server, zone, strings.ToUpper(ans.Net), err)
		}
		if r.Truncated && ans.Net == "udp" {
			ans.Net = "tcp"
			continue
		}
		break
	}
	switch {
	case r.Rcode == dns.RcodeNameError:
		return ans, fmt.Errorf("%s says %s does not exist (NXDOMAIN): it is not delegated in the parent zone that server serves", server, zone)
	case r.Rcode != dns.RcodeSuccess:
		return ans, fmt.Errorf("%s answered the DS query for %s with %s: it does not serve the parent zone of %s", server, zone, dns.RcodeToString[r.Rcode], zone)
	case !r.Authoritative:
		return ans, fmt.Errorf("%s answered the DS query for %s without authority (a referral or a cached answer): give a server of the parent zone", server, zone)
	}
	for _, rr := range r.Answer {
		ds, ok := rr.(*dns.DS)
		if !ok || dns.CanonicalName(ds.Hdr.Name) != zone {
			continue
		}
		ans.DS = append(ans.DS, ds)
		ans.TTL = ds.Hdr.Ttl
	}
	return ans, nil
}

// DSMatch is one DS record of the parent and the key it names.
type DSMatch struct {
	DS *dns.DS
	// Key is the zone's DNSKEY the DS is a digest of; nil: none of the
	// zone's published keys.
	Key *dns.DNSKEY
	// Why says why a DS names no key: a digest type not checked, or no
	// key with its tag and algorithm, or one whose digest differs.
	Why string
}

// DSCheck is a parent's DS RRset compared with the zone's keys.
type DSCheck struct {
	// Matched are the DS records naming a key the parent should point
	// at; Retiring those naming a published key it should no longer point
	// at (a KSK being rolled out); Stray those naming no published key.
	Matched, Retiring, Stray []DSMatch
	// Missing are the keys the parent should point at and does not.
	Missing []*dns.DNSKEY
}

// OK reports whether the parent's DS set is what it should be: every key
// it should point at has a DS, and every DS names one of them.
func (c DSCheck) OK() bool { return len(c.Missing) == 0 && len(c.Stray) == 0 && len(c.Retiring) == 0 }

// Names reports whether the parent has a DS naming key.
func (c DSCheck) Names(key *dns.DNSKEY) bool {
	for _, m := range append(append([]DSMatch(nil), c.Matched...), c.Retiring...) {
		if m.Key != nil && m.Key.KeyTag() == key.KeyTag() && m.Key.Algorithm == key.Algorithm && m.Key.PublicKey == key.PublicKey {
			return true
		}
	}
	return false
}

// Digest types a DS may have: SHA-256 is what steer prints, SHA-384 is
// accepted from a parent; SHA-1 is matched, as some registries still add
// it beside SHA-256, but RFC 8624 says not to publish it.
var dsDigests = map[uint8]string{dns.SHA1: "SHA-1", dns.SHA256: "SHA-256", dns.SHA384: "SHA-384"}

// DigestName names a DS digest type ("SHA-256", or "type N").
func DigestName(t uint8) string {
	if n, ok := dsDigests[t]; ok {
		return n
	}
	return "type " + strconv.Itoa(int(t))
}

// KeyOfDS returns the key of keys ds is a digest of, or nil and why not.
func KeyOfDS(ds *dns.DS, keys []*dns.DNSKEY) (*dns.DNSKEY, string) {
	if _, ok := dsDigests[ds.DigestType]; !ok {
		return nil, fmt.Sprintf("digest type %d is not one steer checks (SHA-256, SHA-384, SHA-1)", ds.DigestType)
	}
	tagged := false
	for _, k := range keys {
		if k.KeyTag() != ds.KeyTag || k.Algorithm != ds.Algorithm {
			continue
		}
		tagged = true
		if d := k.ToDS(ds.DigestType); d != nil && strings.EqualFold(d.Digest, ds.Digest) {
			return k, ""
		}
	}
	if tagged {
		return nil, "a published key has its tag and algorithm, but its digest differs"
	}
	return nil, "no published key has its tag and algorithm"
}

// CheckDS compares the parent's DS records with the zone's keys:
// published are every DNSKEY the zone publishes, want the SEP keys the
// parent should point at (the others published may still be pointed at
// while they are rolled out).
func CheckDS(parent []*dns.DS, published, want []*dns.DNSKEY) DSCheck {
	var c DSCheck
	named := map[*dns.DNSKEY]bool{}
	for _, ds := range parent {
		k, why := KeyOfDS(ds, published)
		switch {
		case k == nil:
			c.Stray = append(c.Stray, DSMatch{DS: ds, Why: why})
		case containsKey(want, k):
			c.Matched = append(c.Matched, DSMatch{DS: ds, Key: k})
			named[k] = true
		default:
			c.Retiring = append(c.Retiring, DSMatch{DS: ds, Key: k})
		}
	}
	for _, w := range want {
		found := false
		for k := range named {
			found = found || sameKey(k, w)
		}
		if !found {
			c.Missing = append(c.Missing, w)
		}
	}
	return c
}

func containsKey(keys []*dns.DNSKEY, k *dns.DNSKEY) bool {
	for _, o := range keys {
		if sameKey(o, k) {
			return true
		}
	}
	return false
}

func sameKey(a, b *dns.DNSKEY) bool {
	return a.Algorithm == b.Algorithm && a.Flags == b.Flags && a.Protocol == b.Protocol && a.PublicKey == b.PublicKey
}
