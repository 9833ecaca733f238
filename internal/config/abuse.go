package config

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/rrl"
)

// This file holds the abuse-protection keys: response rate limiting
// (rrl) and DNS cookies (cookies); the TCP limits are in tcp.go. Each
// key's type, range and default are in its comment and in
// applyAbuseDefaults and checkAbuse.

// RRL configures response rate limiting of UDP answers to queries without
// a valid server cookie (TCP and valid cookies are never limited). Its
// keys are those of rrl.Config, decoded into it (see that type for each
// key's meaning, range and default), plus:
type RRL struct {
	// Enabled turns rate limiting on; default true.
	Enabled bool `yaml:"enabled"`
	// Config holds the limiter's settings, the keys the file leaves out
	// taken from rrl.Defaults; its Window and Exempt are filled at check
	// from the two keys below.
	rrl.Config `yaml:",inline"`
	// Window is how much history a bucket keeps: whole seconds, 1s..1h.
	Window Duration `yaml:"window"`
	// Exempt lists source addresses or prefixes never limited. Default
	// (the key left out): loopback, 127.0.0.0/8 and ::1, which no packet
	// from another host can carry (Linux drops them as martians), so
	// local monitoring and tests are never limited; "exempt: []" limits
	// loopback too.
	Exempt []string `yaml:"exempt"`
}

// Cookies configures DNS cookies (RFC 7873, server cookies per RFC 9018).
type Cookies struct {
	// Enabled answers COOKIE options; default true.
	Enabled *bool `yaml:"enabled"`
	// SecretFile holds the server secret: one or two lines of 32 hex
	// digits, the first minting and verifying, the second (the previous
	// secret, during a rollover) verifying only. Give every node of an
	// anycast set the same file (BIND's cookie-secret, NSD's
	// cookie-secret-file and Knot's mod-cookies secret accept the same
	// value). Empty: a random secret per node, kept until it restarts.
	SecretFile string `yaml:"secret_file"`
	// MaxNoCookieUDP caps a UDP answer to a query without a valid server
	// cookie: a larger one is sent truncated. 512..1232; default 1232
	// (no cap beyond the usual); 512 for exposed nodes.
	MaxNoCookieUDP int `yaml:"max_nocookie_udp"`
}

// Defaults of the abuse-protection keys. Those of rrl are the rrl
// package's (rrl.Defaults).
const (
	DefaultMaxNoCookieUDP = 1232
	minNoCookieUDP        = 512
	maxNoCookieUDP        = 1232
	maxRate               = 1_000_000
)

func ptr[T any](v T) *T { return &v }

func (c *Config) applyAbuseDefaults() {
	// A key the file leaves out takes rrl's default; a rate, slip or
	// switch it gives, even as 0 or false, stays (0 is a valid value of
	// those), while a window, prefix or table size of 0 means the default.
	r, d := &c.RRL, rrl.Defaults()
	given := func(key string) bool { _, ok := c.lines["rrl."+key]; return ok }
	if !given("enabled") {
		r.Enabled = true
	}
	if !given("responses_per_second") {
		r.ResponsesPerSecond = d.ResponsesPerSecond
	}
	if !given("all_per_second") {
		r.AllPerSecond = max(d.AllPerSecond, r.ResponsesPerSecond)
	}
	if r.Window == 0 {
		r.Window = Duration(time.Duration(d.Window) * time.Second)
	}
	if !given("slip") {
		r.Slip = d.Slip
	}
	if r.IPv4Prefix == 0 {
		r.IPv4Prefix = d.IPv4Prefix
	}
	if r.IPv6Prefix == 0 {
		r.IPv6Prefix = d.IPv6Prefix
	}
	if !given("ecs_aware") {
		r.ECSAware = d.ECSAware
	}
	if r.Exempt == nil {
		r.Exempt = []string{"127.0.0.0/8", "::1"}
	}
	if r.TableSize == 0 {
		r.TableSize = d.TableSize
	}
	if c.Cookies.Enabled == nil {
		c.Cookies.Enabled = ptr(true)
	}
	if c.Cookies.MaxNoCookieUDP == 0 {
		c.Cookies.MaxNoCookieUDP = DefaultMaxNoCookieUDP
	}
}

func (c *Config) checkAbuse(probs *diag.Problems) {
	f := c.File
	bad := func(key, format string, args ...any) {
		probs.Add(f, c.Line(key), "%s: %s", key, fmt.Sprintf(format, args...))
	}
	r := &c.RRL
	if n := r.ResponsesPerSecond; n < 1 || n > maxRate {
		bad("rrl.responses_per_second", "%d is not between 1 and 1000000 (turn rate limiting off with rrl.enabled: false)", n)
	}
	if a := r.AllPerSecond; a != 0 && (a < r.ResponsesPerSecond || a > maxRate) {
		bad("rrl.all_per_second", "%d is not 0 (off) or between responses_per_second (%d) and 1000000", a, r.ResponsesPerSecond)
	}
	if w := time.Duration(r.Window); w < time.Second || w > time.Hour || w%time.Second != 0 {
		bad("rrl.window", "%s is not a whole number of seconds between 1s and 1h", w)
	}
	r.Config.Window = int(time.Duration(r.Window) / time.Second)
	if s := r.Slip; s < 0 || s > 10 {
		bad("rrl.slip", "%d is not between 0 (never) and 10", s)
	}
	if r.IPv4Prefix < 1 || r.IPv4Prefix > 32 {
		bad("rrl.ipv4_prefix", "%d is not between 1 and 32", r.IPv4Prefix)
	}
	if r.IPv6Prefix < 1 || r.IPv6Prefix > 128 {
		bad("rrl.ipv6_prefix", "%d is not between 1 and 128", r.IPv6Prefix)
	}
	if r.TableSize < rrl.MinTableSize || r.TableSize > rrl.MaxTableSize {
		bad("rrl.table_size", "%d is not between 256 and 16777216", r.TableSize)
	}
	r.Config.Exempt = nil
	for i, e := range r.Exempt {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			if a, aerr := netip.ParseAddr(e); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		if err != nil {
			bad(fmt.Sprintf("rrl.exempt[%d]", i), "%q is not an address or a prefix such as 192.0.2.0/24", e)
			continue
		}
		r.Config.Exempt = append(r.Config.Exempt, p.Masked())
	}
	if m := c.Cookies.MaxNoCookieUDP; m < minNoCookieUDP || m > maxNoCookieUDP {
		bad("cookies.max_nocookie_udp", "%d is not between 512 and 1232", m)
	}
}
