package config

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/quorum"
)

// Fleet makes the node one of many run as one, on etcd: the configuration
// and zones come from the store, health is decided by a quorum of the
// nodes' observations, and operator overrides are fleet-wide. A node's
// own file holds this section and, optionally, the keys that are the
// node's own (NodeFileKeys), which override the pushed configuration's;
// any other section belongs in the pushed configuration and is an error.
type Fleet struct {
	// Node is this node's name, unique in the fleet: letters, digits,
	// '-', '_' and '.'; default the host name.
	Node string `yaml:"node"`
	// Region groups nodes for regional verdicts; optional.
	Region string `yaml:"region"`
	// Etcd is how to reach the store.
	Etcd Etcd `yaml:"etcd"`
	// LeaseTTL is how long a node's observations outlive it: 2s..5m;
	// default 10s.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// ViewGrace is how long the last fleet view is kept when the store is
	// unreachable before the node falls back to its own checks: 0..24h;
	// default 60s.
	ViewGrace Duration `yaml:"view_grace"`
	// HealthQuorum turns observations into verdicts.
	HealthQuorum HealthQuorum `yaml:"health_quorum"`
	// AllowInsecureKeys lets the node that drives the key plans write
	// the private keys it generates (a ZSK rollover's successor, a new
	// KSK) to a store that is not both TLS and authenticated, as steer
	// fleet push --allow-insecure-keys does for the pushed keys; without
	// it such a rollover is held, the zone signed with its current keys.
	AllowInsecureKeys bool `yaml:"allow_insecure_keys"`
}

// Etcd is the store's address and credentials.
type Etcd struct {
	// Endpoints are the members' client URLs (http:// or https://).
	Endpoints []string `yaml:"endpoints"`
	// Prefix is where the fleet's keys live; default /steer/v1.
	Prefix string `yaml:"prefix"`
	// TLS, when CA or Cert is set, is used for https endpoints.
	TLS EtcdTLS `yaml:"tls"`
	// Username and PasswordFile authenticate to etcd (both or neither).
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	// Password is PasswordFile's content, read once at load.
	Password Secret `yaml:"-"`
	// DialTimeout bounds connecting to a member: 100ms..1m; default 5s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// QuotaBackendBytes is the members' --quota-backend-bytes (etcd's
	// API does not tell it): the node warns when the database passes
	// half of it. 1 MiB..1 TiB; default etcd's, 2 GiB.
	QuotaBackendBytes int64 `yaml:"quota_backend_bytes"`
}

// EtcdTLS holds PEM files: the CA that signed the members' certificates,
// and the client's certificate and key (both or neither).
type EtcdTLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// HealthQuorum is the rule that turns many nodes' observations of a
// target into one verdict (see the README's fleet section).
type HealthQuorum struct {
	// Config is the rule, decoded into quorum.Config (healthy_above:
	// 0..<1, default 0.18, Route 53's rule; min_observers: 1..1000,
	// default 3; regional), with hold_down filled in at check.
	quorum.Config `yaml:",inline"`
	// HoldDown is how long a new verdict must hold before it is used:
	// 0..1h; default 10s.
	HoldDown Duration `yaml:"hold_down"`
	// Observers is how many nodes probe each target: 0 (default: 5, or
	// every node when fewer; with regional, min_observers + 1 per region,
	// quorum.PickK) or 1..1000.
	Observers int `yaml:"observers"`
}

// Defaults of the fleet keys. Those of health_quorum are the quorum
// package's (quorum.Defaults).
const (
	DefaultFleetPrefix    = "/steer/v1"
	DefaultLeaseTTL       = 10 * time.Second
	DefaultViewGrace      = 60 * time.Second
	DefaultEtcdDialTimout = 5 * time.Second
	// DefaultEtcdQuota is etcd's default --quota-backend-bytes; typed, as
	// an untyped 2 GiB passed to a ...any is an int, which overflows on
	// 32-bit systems.
	DefaultEtcdQuota int64 = 2 << 30
)

func (c *Config) applyFleetDefaults() {
	f := c.Fleet
	if f == nil {
		return
	}
	if f.Node == "" {
		f.Node, _ = os.Hostname()
	}
	if f.Etcd.Prefix == "" {
		f.Etcd.Prefix = DefaultFleetPrefix
	}
	f.Etcd.Prefix = "/" + strings.Trim(f.Etcd.Prefix, "/")
	if f.Etcd.DialTimeout == 0 {
		f.Etcd.DialTimeout = Duration(DefaultEtcdDialTimout)
	}
	if f.Etcd.QuotaBackendBytes == 0 {
		f.Etcd.QuotaBackendBytes = DefaultEtcdQuota
	}
	if f.LeaseTTL == 0 {
		f.LeaseTTL = Duration(DefaultLeaseTTL)
	}
	if f.ViewGrace == 0 {
		f.ViewGrace = Duration(DefaultViewGrace)
	}
	// A key left out takes quorum's default; healthy_above and hold_down
	// given as 0 stay 0.
	q, d := &f.HealthQuorum, quorum.Defaults()
	given := func(key string) bool { _, ok := c.lines["fleet.health_quorum."+key]; return ok }
	if !given("healthy_above") {
		q.HealthyAbove = d.HealthyAbove
	}
	if q.MinObservers == 0 {
		q.MinObservers = d.MinObservers
	}
	if !given("hold_down") {
		q.HoldDown = Duration(d.HoldDown)
	}
	q.Config.HoldDown, q.Stale = time.Duration(q.HoldDown), d.Stale
}

// NodeFileKeys are the top-level keys a fleet node's own file may hold:
// the fleet section and what is the node's own, which overrides the
// pushed configuration's (listen, api, anycast, rum, node, identity,
// state_dir, and of transfers only NodeTransferKeys).
var NodeFileKeys = []string{"fleet", "node", "identity", "listen", "api", "anycast", "rum", "state_dir", "transfers"}

// NodeTransferKeys are the keys of transfers a node's own file may hold:
// the addresses it sends from, which are its own (an anycast node's
// unicast address); the other transfer settings are the fleet's.
var NodeTransferKeys = []string{"transfers.transfer_source", "transfers.notify_source"}

// checkNodeFile reports, in a fleet node's own file, every section that
// belongs in the pushed configuration.
func (c *Config) checkNodeFile(probs *diag.Problems) {
	type key struct {
		name string
		line int
	}
	var keys []key
	for k, ln := range c.lines {
		switch {
		case !strings.ContainsAny(k, ".[") && !slices.Contains(NodeFileKeys, k):
			keys = append(keys, key{k, ln})
		case strings.HasPrefix(k, "transfers.") && !slices.Contains(NodeTransferKeys, k):
			keys = append(keys, key{k, ln})
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].line < keys[j].line })
	for _, k := range keys {
		if strings.HasPrefix(k.name, "transfers.") {
			probs.Add(c.File, k.line, "%s: this is a fleet node's file (it has a fleet section): %s is the fleet's and belongs in the configuration pushed with steer fleet push; a node's file holds of transfers only %s",
				k.name, k.name, strings.Join(NodeTransferKeys, " and "))
			continue
		}
		probs.Add(c.File, k.line, "%s: this is a fleet node's file (it has a fleet section): %s belongs in the configuration pushed with steer fleet push; a node's file holds only %s",
			k.name, k.name, strings.Join(NodeFileKeys, ", "))
	}
}

func (c *Config) checkFleet(probs *diag.Problems) {
	f := c.Fleet
	if f == nil {
		return
	}
	c.checkNodeFile(probs)
	bad := func(key, format string, args ...any) {
		probs.Add(c.File, c.Line(key), "%s: %s", key, fmt.Sprintf(format, args...))
	}
	if f.Node == "" || strings.Trim(f.Node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" || len(f.Node) > 63 {
		bad("fleet.node", "%q is not a node name (1 to 63 letters, digits, '-', '_' or '.')", f.Node)
	}
	if strings.ContainsAny(f.Region, "/ ") {
		bad("fleet.region", "%q may not hold '/' or spaces", f.Region)
	}
	if len(f.Etcd.Endpoints) == 0 {
		bad("fleet.etcd.endpoints", "at least one etcd client URL is needed, e.g. https://etcd-a:2379")
	}
	tlsSet := f.Etcd.TLS.CA != "" || f.Etcd.TLS.Cert != ""
	for i, e := range f.Etcd.Endpoints {
		u, err := url.Parse(e)
		key := fmt.Sprintf("fleet.etcd.endpoints[%d]", i)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad(key, "%q is not an http:// or https:// URL with a host", e)
		case u.Scheme == "http" && tlsSet:
			bad(key, "%q is plain http but fleet.etcd.tls is set", e)
		}
	}
	if (f.Etcd.TLS.Cert == "") != (f.Etcd.TLS.Key == "") {
		bad("fleet.etcd.tls", "cert and key go together")
	}
	if (f.Etcd.Username == "") != (f.Etcd.PasswordFile == "") {
		bad("fleet.etcd.username", "username and password_file go together")
	}
	if d := time.Duration(f.Etcd.DialTimeout); d < 100*time.Millisecond || d > time.Minute {
		bad("fleet.etcd.dial_timeout", "%s is not between 100ms and 1m", d)
	}
	if q := f.Etcd.QuotaBackendBytes; q < 1<<20 || q > 1<<40 {
		bad("fleet.etcd.quota_backend_bytes", "%d is not between 1 MiB (1048576) and 1 TiB: give the members' --quota-backend-bytes (default %d, etcd's)", q, DefaultEtcdQuota)
	}
	if d := time.Duration(f.LeaseTTL); d < 2*time.Second || d > 5*time.Minute || d%time.Second != 0 {
		bad("fleet.lease_ttl", "%s is not a whole number of seconds between 2s and 5m (etcd's lease granularity)", d)
	}
	if d := time.Duration(f.ViewGrace); d < 0 || d > 24*time.Hour {
		bad("fleet.view_grace", "%s is not between 0s and 24h", d)
	}
	q := f.HealthQuorum
	if h := q.HealthyAbove; h < 0 || h >= 1 || math.IsNaN(h) {
		bad("fleet.health_quorum.healthy_above", "%g is not at least 0 and below 1", h)
	}
	if q.MinObservers < 1 || q.MinObservers > 1000 {
		bad("fleet.health_quorum.min_observers", "%d is not between 1 and 1000", q.MinObservers)
	}
	if d := time.Duration(q.HoldDown); d < 0 || d > time.Hour {
		bad("fleet.health_quorum.hold_down", "%s is not between 0s and 1h", d)
	}
	if q.Observers < 0 || q.Observers > 1000 {
		bad("fleet.health_quorum.observers", "%d is not 0 (default) or between 1 and 1000", q.Observers)
	}
}
