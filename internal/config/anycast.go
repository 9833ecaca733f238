package config

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/qtype"
)

// Anycast configures the embedded BGP speaker that announces the node's
// service prefixes only while it is healthy. Its settings are read when
// the server starts; a reload does not change them.
type Anycast struct {
	// RouterID is the BGP identifier, an IPv4 address.
	RouterID string `yaml:"router_id"`
	// LocalAS is this node's AS number.
	LocalAS int64 `yaml:"local_as"`
	// Prefixes are announced together, all or none.
	Prefixes []string `yaml:"prefixes"`
	// AllowLongPrefixes permits prefixes longer than /24 (IPv4) or /48
	// (IPv6), which transit providers filter; for labs.
	AllowLongPrefixes bool `yaml:"allow_long_prefixes"`
	// NextHopV4 is "self" (the default: the session's local address) or an
	// IPv4 address.
	NextHopV4 string `yaml:"next_hop_v4"`
	// NextHopV6 is an IPv6 address, or "self" when every peer is reached
	// over IPv6 (over an IPv4 session "self" would be IPv4-mapped).
	NextHopV6 string `yaml:"next_hop_v6"`
	// Peers are the BGP neighbours announced to.
	Peers []AnycastPeer `yaml:"peers"`
	// SelfCheck is the DNS query the node sends its own listener.
	SelfCheck SelfCheck `yaml:"self_check"`
	// WithdrawBelow is the health score (the share of this node's checked
	// targets that are up) under which the prefixes are withdrawn;
	// nil means DefaultWithdrawBelow.
	WithdrawBelow *float64 `yaml:"withdraw_below"`
	// Overload prepends the AS path while the node is overloaded.
	Overload Overload `yaml:"overload"`
	// Mode is "active" (announce while healthy) or "standby" (peered, not
	// announced until the admin API says so).
	Mode string `yaml:"mode"`
	// Drain is how long DNS keeps answering after the withdrawal at
	// shutdown; nil means DefaultDrain.
	Drain *Duration `yaml:"drain"`

	// Decoded at check, for the speaker: RouterID; NextHopV4 and
	// NextHopV6 (invalid for self); Prefixes.
	RouterIP           netip.Addr     `yaml:"-"`
	NextHop4, NextHop6 netip.Addr     `yaml:"-"`
	Announce           []netip.Prefix `yaml:"-"`
}

// AnycastPeer is one BGP neighbour.
type AnycastPeer struct {
	Address  string `yaml:"address"`
	Port     int    `yaml:"port"` // default 179
	RemoteAS int64  `yaml:"remote_as"`
	// LocalAddress is the source address of the session; peers match
	// neighbours by it.
	LocalAddress string   `yaml:"local_address"`
	HoldTime     Duration `yaml:"hold_time"`     // default 90s; 0 or at least 3s
	ConnectRetry Duration `yaml:"connect_retry"` // default 1s, whole seconds
	// Multihop is the TTL for a peer more than one hop away (0: directly
	// connected).
	Multihop int `yaml:"multihop"`
	// PasswordFile holds the TCP MD5 password (RFC 2385), relative to the
	// configuration file.
	PasswordFile string `yaml:"password_file"`
	// Password is PasswordFile's content, read once at load.
	Password Secret `yaml:"-"`
	// IP and LocalIP are Address and LocalAddress decoded at check
	// (LocalIP invalid when LocalAddress is empty).
	IP, LocalIP netip.Addr `yaml:"-"`
}

// SelfCheck is a DNS query to the node's own listener with rise/fall
// counting, like a health check.
type SelfCheck struct {
	Name string `yaml:"name"` // default: the first zone's origin
	Type string `yaml:"type"` // default SOA
	// QType is Type decoded (after check).
	QType    uint16   `yaml:"-"`
	Interval Duration `yaml:"interval"`
	Timeout  Duration `yaml:"timeout"`
	Rise     int      `yaml:"rise"`
	Fall     int      `yaml:"fall"`
}

// Overload configures AS-path prepending under load.
type Overload struct {
	// QPSAbove turns prepending on when the query rate stays above it for
	// a few seconds; 0 turns overload handling off.
	QPSAbove float64 `yaml:"qps_above"`
	// Prepend is how many extra copies of the local AS to originate.
	Prepend int `yaml:"prepend"`
}

// Anycast defaults.
const (
	DefaultWithdrawBelow    = 0.8
	DefaultDrain            = 5 * time.Second
	DefaultBGPPort          = 179
	DefaultHoldTime         = 90 * time.Second
	DefaultConnectRetry     = time.Second
	DefaultSelfCheckType    = "SOA"
	DefaultSelfCheckEvery   = time.Second
	DefaultSelfCheckTimeout = 500 * time.Millisecond
	DefaultSelfCheckRise    = 2
	DefaultSelfCheckFall    = 2
	DefaultPrepend          = 3
	// MaxPrefixV4 and MaxPrefixV6 are the longest prefixes transit
	// providers accept.
	MaxPrefixV4 = 24
	MaxPrefixV6 = 48
)

// DrainPeriod is Drain or its default.
func (a *Anycast) DrainPeriod() time.Duration {
	if a.Drain == nil {
		return DefaultDrain
	}
	return time.Duration(*a.Drain)
}

// Threshold is WithdrawBelow or its default.
func (a *Anycast) Threshold() float64 {
	if a.WithdrawBelow == nil {
		return DefaultWithdrawBelow
	}
	return *a.WithdrawBelow
}

// ParsedPrefixes returns Prefixes as decoded at load.
func (a *Anycast) ParsedPrefixes() []netip.Prefix { return a.Announce }

// checkAnycast applies the anycast defaults and checks the section.
func (c *Config) checkAnycast(probs *diag.Problems) {
	a := c.Anycast
	if a == nil {
		return
	}
	f := c.File
	at := func(key string) int {
		if n := c.Line("anycast." + key); n > 0 {
			return n
		}
		return c.Line("anycast")
	}
	add := func(key, format string, args ...any) {
		probs.Add(f, at(key), "anycast."+key+": "+format, args...)
	}

	if a.RouterID == "" {
		add("router_id", "missing: the BGP router ID, an IPv4 address such as 198.51.100.1")
	} else if ip, err := netip.ParseAddr(a.RouterID); err != nil || !ip.Is4() {
		add("router_id", "%q is not an IPv4 address", a.RouterID)
	} else {
		a.RouterIP = ip
	}
	if a.LocalAS == 0 {
		add("local_as", "missing: this node's AS number")
	} else if !validAS(a.LocalAS) {
		add("local_as", "%d is not an AS number (1 to 4294967294, not 23456)", a.LocalAS)
	}

	var has6 bool
	if len(a.Prefixes) == 0 {
		add("prefixes", "list at least one prefix to announce")
	}
	seen := map[netip.Prefix]bool{}
	a.Announce = nil
	for i, s := range a.Prefixes {
		key := fmt.Sprintf("prefixes[%d]", i)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			add(key, "%q is not a prefix such as 192.0.2.0/24", s)
			continue
		}
		if p.Addr().Is4In6() {
			add(key, "%s is IPv4-mapped; write the IPv4 prefix", s)
			continue
		}
		if p.Masked() != p {
			add(key, "%s has host bits set; did you mean %s?", s, p.Masked())
			continue
		}
		if seen[p] {
			add(key, "%s is listed twice", s)
		}
		seen[p] = true
		a.Announce = append(a.Announce, p)
		max := MaxPrefixV4
		if p.Addr().Is6() {
			max, has6 = MaxPrefixV6, true
		}
		if p.Bits() > max && !a.AllowLongPrefixes {
			add(key, "%s is longer than /%d: transit providers filter prefixes longer than /%d (IPv4) and /%d (IPv6), so it would not be reachable; set allow_long_prefixes: true for a lab",
				s, max, MaxPrefixV4, MaxPrefixV6)
		}
	}

	if a.NextHopV4 == "" {
		a.NextHopV4 = "self"
	}
	if a.NextHopV4 != "self" {
		if ip, err := netip.ParseAddr(a.NextHopV4); err != nil || !ip.Is4() {
			add("next_hop_v4", "%q is neither self nor an IPv4 address", a.NextHopV4)
		} else {
			a.NextHop4 = ip
		}
	}

	allV6Peers := len(a.Peers) > 0
	for i := range a.Peers {
		c.checkPeer(probs, i, at)
		if ip, err := netip.ParseAddr(a.Peers[i].Address); err != nil || !ip.Is6() || ip.Is4In6() {
			allV6Peers = false
		}
	}
	if len(a.Peers) == 0 {
		add("peers", "list at least one BGP peer")
	}
	switch {
	case a.NextHopV6 == "" && has6 && !allV6Peers:
		add("next_hop_v6", "missing: an IPv6 prefix announced over an IPv4 session needs an IPv6 next hop (self would be IPv4-mapped, which most peers reject)")
	case a.NextHopV6 == "":
		a.NextHopV6 = "self"
	case a.NextHopV6 == "self":
		if has6 && !allV6Peers {
			add("next_hop_v6", "self over an IPv4 session is an IPv4-mapped address, which most peers reject; give an IPv6 address")
		}
	default:
		ip, err := netip.ParseAddr(a.NextHopV6)
		switch {
		case err != nil || !ip.Is6():
			add("next_hop_v6", "%q is neither self nor an IPv6 address", a.NextHopV6)
		case ip.Is4In6():
			add("next_hop_v6", "%s is IPv4-mapped, which most peers reject; give a real IPv6 address", a.NextHopV6)
		default:
			a.NextHop6 = ip
		}
	}

	sc := &a.SelfCheck
	if sc.Name == "" && len(c.Zones) > 0 {
		sc.Name = c.Zones[0].Origin
	}
	switch _, ok := dns.IsDomainName(sc.Name); {
	case sc.Name == "" && c.Fleet != nil:
		add("self_check.name", "missing: the name the node queries itself for (a fleet node's file has no zones to default to: name one the pushed configuration serves)")
	case sc.Name == "":
		add("self_check.name", "missing: the name the node queries itself for (no zone to default to)")
	case !ok:
		add("self_check.name", "%q is not a domain name", sc.Name)
	}
	if sc.Type == "" {
		sc.Type = DefaultSelfCheckType
	}
	if t, err := qtype.Parse(sc.Type); err != nil {
		add("self_check.type", "unknown query type %q", sc.Type)
	} else {
		sc.QType = t
	}
	if sc.Interval == 0 {
		sc.Interval = Duration(DefaultSelfCheckEvery)
	}
	if sc.Timeout == 0 {
		sc.Timeout = Duration(DefaultSelfCheckTimeout)
	}
	if sc.Rise == 0 {
		sc.Rise = DefaultSelfCheckRise
	}
	if sc.Fall == 0 {
		sc.Fall = DefaultSelfCheckFall
	}
	if sc.Interval < Duration(100*time.Millisecond) {
		add("self_check.interval", "%v is too short (at least 100ms)", time.Duration(sc.Interval))
	}
	if sc.Timeout <= 0 || sc.Timeout > sc.Interval {
		add("self_check.timeout", "%v must be positive and at most the interval (%v)", time.Duration(sc.Timeout), time.Duration(sc.Interval))
	}
	if sc.Rise < 1 || sc.Rise > 100 {
		add("self_check.rise", "%d is not between 1 and 100", sc.Rise)
	}
	if sc.Fall < 1 || sc.Fall > 100 {
		add("self_check.fall", "%d is not between 1 and 100", sc.Fall)
	}

	if w := a.Threshold(); w < 0 || w > 1 {
		add("withdraw_below", "%v is not between 0 and 1", w)
	}
	if a.Overload.QPSAbove < 0 {
		add("overload.qps_above", "%v must not be negative", a.Overload.QPSAbove)
	}
	if a.Overload.QPSAbove > 0 && a.Overload.Prepend == 0 {
		a.Overload.Prepend = DefaultPrepend
	}
	if a.Overload.Prepend < 0 || a.Overload.Prepend > 10 {
		add("overload.prepend", "%d is not between 1 and 10", a.Overload.Prepend)
	}
	if a.Overload.Prepend > 0 && a.Overload.QPSAbove == 0 {
		add("overload.qps_above", "missing: prepend needs the query rate that turns it on")
	}
	if a.Mode == "" {
		a.Mode = "active"
	}
	if a.Mode != "active" && a.Mode != "standby" {
		add("mode", "%q is neither active nor standby", a.Mode)
	}
	if a.DrainPeriod() < 0 {
		add("drain", "must not be negative")
	}
}

func (c *Config) checkPeer(probs *diag.Problems, i int, at func(string) int) {
	p := &c.Anycast.Peers[i]
	pre := fmt.Sprintf("peers[%d]", i)
	add := func(key, format string, args ...any) {
		k := pre
		if key != "" {
			k += "." + key
		}
		n := at(k)
		if n == c.Line("anycast") {
			n = at(pre)
		}
		probs.Add(c.File, n, "anycast."+pre+": "+format, args...)
	}
	addr, err := netip.ParseAddr(p.Address)
	if p.Address == "" {
		add("", "address is missing")
	} else if err != nil || addr.Zone() != "" {
		add("address", "address %q is not an IP address", p.Address)
	} else {
		p.IP = addr
	}
	if p.Port == 0 {
		p.Port = DefaultBGPPort
	}
	if p.Port < 1 || p.Port > 65535 {
		add("port", "port %d is not between 1 and 65535", p.Port)
	}
	if p.RemoteAS == 0 {
		add("", "remote_as is missing")
	} else if !validAS(p.RemoteAS) {
		add("remote_as", "remote_as %d is not an AS number", p.RemoteAS)
	}
	if p.LocalAddress != "" {
		la, lerr := netip.ParseAddr(p.LocalAddress)
		switch {
		case lerr != nil || la.Zone() != "":
			add("local_address", "local_address %q is not an IP address", p.LocalAddress)
		case err == nil && la.Unmap().Is4() != addr.Unmap().Is4():
			add("local_address", "local_address %s and address %s are of different families", p.LocalAddress, p.Address)
		default:
			p.LocalIP = la
		}
	}
	if p.HoldTime == 0 {
		p.HoldTime = Duration(DefaultHoldTime)
	}
	if h := time.Duration(p.HoldTime); h < 3*time.Second || h%time.Second != 0 || h > 65535*time.Second {
		add("hold_time", "hold_time %v must be whole seconds, at least 3s (RFC 4271)", h)
	}
	if p.ConnectRetry == 0 {
		p.ConnectRetry = Duration(DefaultConnectRetry)
	}
	if r := time.Duration(p.ConnectRetry); r < time.Second || r%time.Second != 0 {
		add("connect_retry", "connect_retry %v must be whole seconds, at least 1s", r)
	}
	if p.Multihop < 0 || p.Multihop > 255 {
		add("multihop", "multihop %d is not a TTL between 1 and 255", p.Multihop)
	}
	for j := range i {
		q := c.Anycast.Peers[j]
		if q.Address == p.Address && p.Address != "" {
			add("address", "address %s is already a peer (peers[%d])", p.Address, j)
		}
	}
}

func validAS(n int64) bool {
	return n >= 1 && n <= 4294967294 && n != 23456
}
