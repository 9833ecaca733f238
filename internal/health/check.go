// Package health owns the active health checks of pool targets: the check
// templates and their validation, the probes (http, https, tcp, dns), the
// rise/fall state machine kept for each target, one checker goroutine per
// distinct (target address, check) pair, external overrides (up, down,
// drain), the feed file that sets overrides from outside (Feed), and the
// persistence of last known statuses across restarts.
//
// Callers ask Manager.Usable whether a target may be answered. A target with
// no result yet is Unknown and counts as usable, so a restart never blanks
// answers; a status restored by LoadState stands until the first real result.
//
// State machine (per Key):
//
//   - Unknown becomes Up on the first success (fast start-up) and Down after
//     Fall consecutive failures.
//   - Up becomes Down after Fall consecutive failures.
//   - Down becomes Up after Rise consecutive successes.
//   - A status restored by LoadState is provisional: like Unknown, the first
//     success makes it Up at once; failures count toward Fall as usual (so a
//     restored Down stays Down until a success).
//
// Checks start at a fixed rate (a ticker, first run at a random offset within
// the interval) and Validate requires Timeout <= Interval, so a target that
// fails is unusable at most Interval×Fall + Timeout after it failed.
//
// The Manager owns its metrics (metrics.go): check durations and results,
// state changes and targets by state, registered by RegisterMetrics on the
// registry the node passes in; target addresses are labels only with
// SetTargetLabels (metrics.target_labels).
package health

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Check types.
const (
	TypeHTTP  = "http"
	TypeHTTPS = "https"
	TypeTCP   = "tcp"
	TypeDNS   = "dns"
)

// Defaults applied by WithDefaults to zero fields.
const (
	DefaultInterval = 5 * time.Second
	DefaultTimeout  = 2 * time.Second // capped at the interval when that is shorter
	DefaultRise     = 2
	DefaultFall     = 3
)

// MinInterval is the shortest interval Validate accepts.
const MinInterval = 10 * time.Millisecond

const (
	maxRiseFall = 100      // largest rise or fall Validate accepts
	maxBody     = 64 << 10 // bytes of body read for BodyContains
)

// Check is a named check template, as in the config:
//
//	https-healthz: { type: https, path: /healthz, port: 443, host: shop.example.com, expect: [200, 204], interval: 5s, timeout: 2s, rise: 2, fall: 3 }
//	tcp443: { type: tcp, port: 443, interval: 5s, timeout: 1s, rise: 2, fall: 2 }
//	dns: { type: dns, name: example.com, qtype: SOA, port: 53, interval: 5s, timeout: 1s }
//
// Zero fields take defaults (see WithDefaults). The yaml tags are the
// template's keys in the configuration file, which decodes into this
// type; the type to ask and the durations, which the file writes as a
// mnemonic and as Go durations, internal/config decodes at check.
type Check struct {
	Name string `yaml:"-"`    // the template's name in the config
	Type string `yaml:"type"` // http, https, tcp or dns

	// Port is the target port; default 80 (http), 443 (https), 53 (dns);
	// required for tcp.
	Port int `yaml:"port"`

	// http and https only.
	Path               string `yaml:"path"`                 // request path, default "/"
	Host               string `yaml:"host"`                 // Host header, and SNI and the verified name for https; default the address
	Expect             []int  `yaml:"expect"`               // status codes that pass; default [200]. Redirects are not followed.
	BodyContains       string `yaml:"body_contains"`        // when set, the first 64 KiB of the body must contain it
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"` // https: do not verify the certificate

	// dns only. The query goes over UDP with RD=0; the check passes on any
	// NOERROR response (with or without AA or answers: the server is up and
	// serving the name); any other rcode, a timeout or a mangled reply fails.
	QName string `yaml:"name"`
	QType uint16 `yaml:"-"` // default SOA

	Interval time.Duration `yaml:"-"`    // between check starts; default 5s
	Timeout  time.Duration `yaml:"-"`    // per check; default min(2s, Interval); at most Interval
	Rise     int           `yaml:"rise"` // consecutive successes taking Down to Up; default 2
	Fall     int           `yaml:"fall"` // consecutive failures taking Up or Unknown to Down; default 3
}

// WithDefaults returns c with defaults filled into zero fields.
func (c Check) WithDefaults() Check {
	c.Type = strings.ToLower(c.Type)
	if c.Port == 0 {
		switch c.Type {
		case TypeHTTP:
			c.Port = 80
		case TypeHTTPS:
			c.Port = 443
		case TypeDNS:
			c.Port = 53
		}
	}
	if c.Type == TypeHTTP || c.Type == TypeHTTPS {
		if c.Path == "" {
			c.Path = "/"
		}
		if len(c.Expect) == 0 {
			c.Expect = []int{200}
		}
	}
	if c.Type == TypeDNS && c.QType == 0 {
		c.QType = dns.TypeSOA
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = min(DefaultTimeout, c.Interval)
	}
	if c.Rise == 0 {
		c.Rise = DefaultRise
	}
	if c.Fall == 0 {
		c.Fall = DefaultFall
	}
	return c
}

// Validate reports every bad value in c (zero values stand for defaults and
// are fine), each as its own line, prefixed by the check's name.
func (c *Check) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		if c.Name != "" {
			msg = fmt.Sprintf("check %q: %s", c.Name, msg)
		}
		errs = append(errs, errors.New(msg))
	}
	d := c.WithDefaults()
	web := d.Type == TypeHTTP || d.Type == TypeHTTPS
	switch d.Type {
	case TypeHTTP, TypeHTTPS, TypeTCP, TypeDNS:
	case "":
		bad("type is required (http, https, tcp or dns)")
	default:
		bad("unknown type %q (want http, https, tcp or dns)", c.Type)
	}
	switch {
	case c.Port < 0 || c.Port > 65535:
		bad("port %d out of range 1-65535", c.Port)
	case d.Port == 0 && d.Type == TypeTCP:
		bad("port is required for tcp checks")
	}
	if web {
		if !strings.HasPrefix(d.Path, "/") {
			bad("path %q must start with /", c.Path)
		}
		if strings.ContainsAny(d.Path, " \t\r\n") {
			bad("path %q contains whitespace", c.Path)
		}
		if strings.ContainsAny(c.Host, " \t\r\n/") {
			bad("host %q is not a host name", c.Host)
		}
		for _, code := range c.Expect {
			if code < 100 || code > 599 {
				bad("expect: %d is not an HTTP status code (100-599)", code)
			}
		}
	} else if d.Type != "" {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"path", c.Path != ""}, {"host", c.Host != ""}, {"expect", len(c.Expect) > 0},
			{"body_contains", c.BodyContains != ""},
		} {
			if f.set {
				bad("%s applies only to http and https checks", f.name)
			}
		}
	}
	if c.InsecureSkipVerify && d.Type != TypeHTTPS && d.Type != "" {
		bad("insecure_skip_verify applies only to https checks")
	}
	if d.Type == TypeDNS {
		if c.QName == "" {
			bad("name (the query name) is required for dns checks")
		} else if _, ok := dns.IsDomainName(c.QName); !ok {
			bad("name %q is not a domain name", c.QName)
		}
	} else if d.Type != "" {
		if c.QName != "" {
			bad("name applies only to dns checks")
		}
		if c.QType != 0 {
			bad("qtype applies only to dns checks")
		}
	}
	intervalOK := true
	switch {
	case c.Interval < 0:
		bad("interval %s is negative", c.Interval)
		intervalOK = false
	case d.Interval < MinInterval:
		bad("interval %s is shorter than %s", c.Interval, MinInterval)
		intervalOK = false
	}
	switch {
	case c.Timeout < 0:
		bad("timeout %s is negative", c.Timeout)
	case intervalOK && d.Timeout > d.Interval:
		bad("timeout %s exceeds interval %s (checks must not overlap)", d.Timeout, d.Interval)
	}
	if c.Rise < 0 || c.Rise > maxRiseFall {
		bad("rise %d out of range 1-%d", c.Rise, maxRiseFall)
	}
	if c.Fall < 0 || c.Fall > maxRiseFall {
		bad("fall %d out of range 1-%d", c.Fall, maxRiseFall)
	}
	return errors.Join(errs...)
}

// equal reports whether two checks (with defaults) probe the same way.
func (c Check) equal(o Check) bool {
	return reflect.DeepEqual(c, o)
}
