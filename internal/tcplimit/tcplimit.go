// Package tcplimit holds the TCP transport's connection limits: the
// options, their defaults and their bounds, stated once. The
// configuration's tcp section decodes into Limits (internal/config embeds
// it, filling the keys left out with SetDefaults and checking each key
// against the bounds here, at file:line), and internal/dnsserver enforces
// it (Server.SetTCPLimits, which calls Validate). It is a leaf, so both can
// import it: config cannot import dnsserver, which is built on it.
package tcplimit

import (
	"fmt"
	"time"
)

// Limits bounds the TCP transport against connection exhaustion
// (RFC 7766 §6.2.3, §10). As gdnsd does, a new connection that would pass a
// cap is not refused: the longest-idle connection (over the whole server
// for MaxConns, within the new connection's source prefix for PerPrefix) is
// closed to make room, so idle connections cannot lock out fresh clients.
//
// A connection's idleness is the time since it was accepted or last had a
// response written (reading a complete query marks it busy until then). A
// connection mid-query (part of a message read) is ranked by its last
// completed exchange, like an idle one. One that has read a complete query
// and not yet finished writing the answer is busy: eviction passes over up
// to 8 busy connections at the head of the list, and takes the
// longest-idle one if all of those are busy. An evicted connection is
// closed gracefully (FIN): its client reads end of file.
//
// The yaml tags are the keys of the configuration's tcp section. The
// durations, which the file writes as Go duration strings, internal/config
// decodes itself (tcp.first_query_timeout into FirstQuery; tcp.idle_timeout
// is the snapshot's, see Idle); the client blocks are no key.
type Limits struct {
	// MaxConns is the number of TCP connections open at once over all
	// listeners: 1 to MaxConnsBound (tcp.max_connections); default
	// DefaultMaxConns.
	MaxConns int `yaml:"max_connections"`
	// PerPrefix is the number of connections open at once from one source
	// prefix (IPv4Prefix or IPv6Prefix bits): 1 to MaxConns
	// (tcp.per_prefix); default DefaultPerPrefix, or MaxConns when that
	// is lower.
	PerPrefix int `yaml:"per_prefix"`
	// IPv4Prefix is the IPv4 prefix length PerPrefix counts by: 1 to 32;
	// default (and from the configuration always) DefaultIPv4Prefix.
	IPv4Prefix int `yaml:"-"`
	// IPv6Prefix is the IPv6 prefix length PerPrefix counts by: 1 to 128;
	// default (and from the configuration always) DefaultIPv6Prefix.
	// IPv4-mapped IPv6 sources count as IPv4.
	IPv6Prefix int `yaml:"-"`
	// Idle closes a connection that sends no complete query for this long
	// after its last answer; it also bounds the write of an answer. 0 (as
	// the configuration leaves it) means the snapshot's TCPIdleTimeout
	// (tcp.idle_timeout, default DefaultIdle), which is the value
	// edns-tcp-keepalive (RFC 7828) advertises; otherwise MinTimeout to
	// MaxTimeout. The option always advertises the snapshot's value, so a
	// non-zero Idle should equal it.
	Idle time.Duration `yaml:"-"`
	// FirstQuery closes a new connection whose first complete query has not
	// arrived this long after it was accepted: MinTimeout to MaxTimeout
	// (tcp.first_query_timeout); default DefaultFirstQuery. When the idle
	// timeout is shorter, it applies instead.
	FirstQuery time.Duration `yaml:"-"`
}

// Defaults of the tcp keys and of the client blocks, which no key changes
// (those of BIND's response rate limiting).
const (
	DefaultMaxConns   = 1000
	DefaultPerPrefix  = 32
	DefaultIPv4Prefix = 24
	DefaultIPv6Prefix = 56
	// DefaultIdle is tcp.idle_timeout's default, the snapshot's
	// TCPIdleTimeout (Limits.Idle 0 stands for it).
	DefaultIdle       = 10 * time.Second
	DefaultFirstQuery = 2 * time.Second
)

// Bounds of the Limits fields.
const (
	// MaxConnsBound is the largest MaxConns.
	MaxConnsBound = 1 << 20
	// MinTimeout and MaxTimeout bound Idle and FirstQuery; MaxTimeout is
	// edns-tcp-keepalive's largest value (6553.5s).
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = 0xFFFF * 100 * time.Millisecond
)

// SetDefaults fills the fields left 0 with their defaults, except Idle,
// whose 0 means the snapshot's idle timeout. PerPrefix defaults to no more
// than MaxConns (at least 1), so a small max_connections alone is valid.
func (l *Limits) SetDefaults() {
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.PerPrefix == 0 {
		l.PerPrefix = min(DefaultPerPrefix, max(l.MaxConns, 1))
	}
	if l.IPv4Prefix == 0 {
		l.IPv4Prefix = DefaultIPv4Prefix
	}
	if l.IPv6Prefix == 0 {
		l.IPv6Prefix = DefaultIPv6Prefix
	}
	if l.FirstQuery == 0 {
		l.FirstQuery = DefaultFirstQuery
	}
}

// Validate reports the first field of l outside its range, naming the field
// and the range.
func (l Limits) Validate() error {
	switch {
	case l.MaxConns < 1 || l.MaxConns > MaxConnsBound:
		return fmt.Errorf("tcplimit: MaxConns = %d: must be 1 to %d", l.MaxConns, MaxConnsBound)
	case l.PerPrefix < 1 || l.PerPrefix > l.MaxConns:
		return fmt.Errorf("tcplimit: PerPrefix = %d: must be 1 to MaxConns (%d)", l.PerPrefix, l.MaxConns)
	case l.IPv4Prefix < 1 || l.IPv4Prefix > 32:
		return fmt.Errorf("tcplimit: IPv4Prefix = %d: must be 1 to 32", l.IPv4Prefix)
	case l.IPv6Prefix < 1 || l.IPv6Prefix > 128:
		return fmt.Errorf("tcplimit: IPv6Prefix = %d: must be 1 to 128", l.IPv6Prefix)
	case l.Idle != 0 && (l.Idle < MinTimeout || l.Idle > MaxTimeout):
		return fmt.Errorf("tcplimit: Idle = %v: must be 0 (the snapshot's idle timeout) or %v to %v", l.Idle, MinTimeout, MaxTimeout)
	case l.FirstQuery < MinTimeout || l.FirstQuery > MaxTimeout:
		return fmt.Errorf("tcplimit: FirstQuery = %v: must be %v to %v", l.FirstQuery, MinTimeout, MaxTimeout)
	}
	return nil
}
