package config

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"sort"
	"strings"

	"github.com/steer-dns/steer/internal/health"
	"go.yaml.in/yaml/v3"
)

// Defaults for ECS privacy truncation (RFC 7871 §11.1 recommends /24 and /56).
const (
	DefaultMaxSourceV4 = 24
	DefaultMaxSourceV6 = 56
	// DefaultSteeredTTL is the TTL of a steered record that sets none.
	DefaultSteeredTTL = 60
)

// Geo lists the geolocation databases, consulted in order: "embedded" or
// paths to mmdb files (relative to the configuration file).
type Geo struct {
	Databases []string `yaml:"databases"`
}

// ECS configures EDNS Client Subnet.
type ECS struct {
	// Enabled honours and echoes ECS; when false the option is ignored and
	// steering uses the resolver's address. Default true.
	Enabled *bool `yaml:"enabled"`
	// MaxSourceV4/V6 truncate longer client subnets before use (privacy).
	MaxSourceV4 int `yaml:"max_source_v4"`
	MaxSourceV6 int `yaml:"max_source_v6"`
	// UnknownClient says what steers a query with no usable ECS (none, or
	// a /0 source) whose resolver is in AnycastResolvers or is not placed
	// by the geo databases: "resolver" (default: the resolver's address)
	// or "node" (the answering node's location and country, scope 0).
	UnknownClient string `yaml:"unknown_client"`
	// AnycastResolvers are the prefixes of resolvers far from their
	// clients (public anycast resolvers that send no ECS), for
	// unknown_client: node.
	AnycastResolvers []string `yaml:"anycast_resolvers"`
}

// Record is one steered name.
type Record struct {
	Name string `yaml:"name"`
	// Type is A, AAAA or CNAME. A and AAAA records answer both address
	// types from their pools' addresses.
	Type string `yaml:"type"`
	TTL  *int   `yaml:"ttl"`
	// TTLWhileDegraded is a shorter TTL used while any pool of the record
	// is down or draining, so recovery reaches clients sooner.
	TTLWhileDegraded *int `yaml:"ttl_while_degraded"`
	// Pools are the sites, by name; never nil once loaded. Pointers, as
	// a map's slots hold its values: 8 slots of 128-byte pools took
	// 1.2 KB a record, for the 3 pools a record usually has.
	Pools map[string]*Pool `yaml:"pools"`
	// Groups are named pools made of pools or other groups, each with its
	// own action; rules and groups refer to them wherever they refer to
	// pools (Route 53's traffic-flow trees).
	Groups map[string]Group `yaml:"groups"`
	// Rules are tried in order; the first that matches (and, with
	// on_unhealthy: next_rule, has a usable pool) decides.
	Rules       []Rule `yaml:"rules"`
	OnUnhealthy string `yaml:"on_unhealthy"`
	WhenAllDown string `yaml:"when_all_down"`
	// Policy names an entry of policies whose rules (and on_unhealthy and
	// when_all_down, unless the record sets its own) the record uses
	// instead of rules of its own; its pools give the names they refer to.
	Policy string `yaml:"policy"`
	// Safety is the record's own safety rule on overrides (safety.go),
	// over its policy's and the top level's.
	Safety *Safety `yaml:"safety"`

	Line int `yaml:"-"`
}

// Policy is a set of rules defined once and referred to by name from any
// number of records (policies: NAME), as gdnsd's geoip maps are; records
// sharing one are compiled once.
type Policy struct {
	// Groups may be defined in the policy too, over the pool names the
	// records using it give.
	Groups      map[string]Group `yaml:"groups"`
	Rules       []Rule           `yaml:"rules"`
	OnUnhealthy string           `yaml:"on_unhealthy"`
	WhenAllDown string           `yaml:"when_all_down"`
	// Safety is the safety rule of every record using the policy, unless
	// the record sets its own (safety.go).
	Safety *Safety `yaml:"safety"`
}

// Pool is one site: its addresses (or CNAME target) and where it is.
type Pool struct {
	Address   string    `yaml:"address"`
	Addresses []string  `yaml:"addresses"`
	Target    string    `yaml:"target"`
	Location  *Location `yaml:"location"`
	// Site names the site whose measured latency applies to the pool
	// (default: the pool's name); pools may share one.
	Site string `yaml:"site"`
	// Bias shifts geoproximity, Route 53 style: -99..99.
	Bias int `yaml:"bias"`
	// Enabled false removes the pool from answers as if it were down.
	Enabled *bool `yaml:"enabled"`
	// HealthCheck names a template of health_checks; the pool's own
	// addresses are its targets.
	HealthCheck string `yaml:"health_check"`
	// MinUp is how many of the pool's addresses must be up for the pool to
	// be up (default 1).
	MinUp int `yaml:"min_up"`
	// Capacity, with a load feed, sheds the pool's networks when its
	// load is above target (load.go).
	Capacity *Capacity `yaml:"capacity"`
}

// HealthCheck is a named health check template: the keys of
// health.Check (its yaml tags, decoded into it), plus the type to ask and
// the durations, decoded at check into Check (with Check.Name, the
// template's name), which is what the snapshot uses.
type HealthCheck struct {
	health.Check `yaml:",inline"`
	QType        string   `yaml:"qtype"` // dns: the type to ask, default SOA
	Interval     Duration `yaml:"interval"`
	Timeout      Duration `yaml:"timeout"`
}

// Location is a latitude and longitude in degrees.
type Location struct {
	Lat float64 `yaml:"lat"`
	Lon float64 `yaml:"lon"`
}

// Rule is a match and the action taken when it matches, or, with Default
// set, the rule that matches everything.
type Rule struct {
	Match   *Match  `yaml:"match"`
	Default *Action `yaml:"default"`
	Action  `yaml:",inline"`
}

// Action says which pools answer.
type Action struct {
	Pool       string       `yaml:"pool"`
	Split      []SplitEntry `yaml:"split"`
	Sticky     string       `yaml:"sticky"`
	Multivalue int          `yaml:"multivalue"`
	Pools      []string     `yaml:"pools"`
	Failover   []string     `yaml:"failover"`
	By         string       `yaml:"by"`
	Fallback   []string     `yaml:"fallback"`
}

// Group is a pool made of pools or other groups: its action (one of
// pool, split with sticky, multivalue with pools, failover, by with
// fallback) chooses among its members, and its site and location stand
// for it in a latency or geoproximity ranking (default: its first
// member's).
type Group struct {
	Action   `yaml:",inline"`
	Site     string    `yaml:"site"`
	Location *Location `yaml:"location"`
}

// SplitEntry is one weighted pool of a split.
type SplitEntry struct {
	Pool   string `yaml:"pool"`
	Weight int    `yaml:"weight"`
}

// Match selects clients. Keys are ANDed; values inside a key are ORed.
type Match struct {
	// Keys holds the match keys by name (country: [IN, LK]). Which names
	// exist and what their values mean is the policy package's table of
	// match keys (policy/keys.go), which reports unknown ones: adding a
	// key does not touch the configuration.
	Keys map[string]StringList `yaml:",inline"`
	// Source is "client" (default: the ECS subnet, else the resolver) or
	// "resolver" (the packet's source address).
	Source string `yaml:"source"`
	// Not negates a nested match.
	Not *Match `yaml:"not"`
}

// StringList is a YAML scalar or a sequence of scalars.
type StringList []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: expected a string", c.Line)
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: expected a string or a list of strings", n.Line)
}

// PoolNames returns the record's pool names in the order they are written.
func (c *Config) PoolNames(recordIndex int) []string {
	r := c.Records[recordIndex]
	names := make([]string, 0, len(r.Pools))
	for n := range r.Pools {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		li, lj := c.RecordLine(recordIndex, ".pools."+names[i]), c.RecordLine(recordIndex, ".pools."+names[j])
		if li != lj {
			return li < lj
		}
		return names[i] < names[j]
	})
	return names
}

// GroupNames returns the names of the groups a record's rules may use —
// its own, then its named policy's — each in the order they are written,
// with where each is defined (a path such as "records[3].groups.eu").
func (c *Config) GroupNames(recordIndex int) (names, paths []string) {
	r := c.Records[recordIndex]
	add := func(groups map[string]Group, prefix string, line func(string) int) {
		start := len(names)
		for n := range groups {
			names = append(names, n)
			paths = append(paths, prefix+n)
		}
		sub, subp := names[start:], paths[start:]
		idx := make([]int, len(sub))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool {
			li, lj := line(sub[idx[i]]), line(sub[idx[j]])
			if li != lj {
				return li < lj
			}
			return sub[idx[i]] < sub[idx[j]]
		})
		ns, ps := make([]string, len(sub)), make([]string, len(sub))
		for i, k := range idx {
			ns[i], ps[i] = sub[k], subp[k]
		}
		copy(sub, ns)
		copy(subp, ps)
	}
	add(r.Groups, fmt.Sprintf("records[%d].groups.", recordIndex), func(n string) int { return c.RecordLine(recordIndex, ".groups."+n) })
	if p, ok := c.Policies[r.Policy]; ok && r.Policy != "" {
		add(p.Groups, "policies."+r.Policy+".groups.", func(n string) int { return c.Line("policies." + r.Policy + ".groups." + n) })
	}
	return names, paths
}

// Line returns the line of a dotted key path such as "records[0].rules[2]",
// or 0 when unknown.
func (c *Config) Line(path string) int {
	if i, rest, ok := recordPath(path); ok {
		return c.RecordLine(i, rest)
	}
	if i, rest, ok := itemPath(path, "zones["); ok {
		return itemLine(c.zoneLines, i, rest)
	}
	return c.lines[path]
}

// zoneKeyGiven reports whether the file gives path (such as
// ".dnssec.refresh") in zones[i].
func (c *Config) zoneKeyGiven(i int, path string) bool {
	if uint(i) >= uint(len(c.zoneLines)) {
		return false
	}
	_, ok := c.zoneLines[i].rel[path]
	return ok
}

// recordPath splits "records[12].pools" into 12 and ".pools". The index
// must be written as fmt's %d writes it: no other spelling is a path.
func recordPath(p string) (i int, rest string, ok bool) { return itemPath(p, "records[") }

// itemPath is recordPath for the sequence whose items' paths start with
// pre ("records[", "zones[").
func itemPath(p, pre string) (i int, rest string, ok bool) {
	if !strings.HasPrefix(p, pre) {
		return 0, "", false
	}
	s := p[len(pre):]
	end := strings.IndexByte(s, ']')
	if end <= 0 || end > 9 || end > 1 && s[0] == '0' {
		return 0, "", false
	}
	for _, d := range s[:end] {
		if d < '0' || d > '9' {
			return 0, "", false
		}
		i = i*10 + int(d-'0')
	}
	return i, s[end+1:], true
}

// RecordLine is Line("records[i]" + path), path being "" or such as
// ".pools.x", without building the path: a call such as
// RecordLine(i, string(buf)) does not allocate.
func (c *Config) RecordLine(i int, path string) int { return itemLine(c.recLines, i, path) }

// itemLine is the line of path in item i of a sequence's tables, or 0.
func itemLine(items []recLines, i int, path string) int {
	if uint(i) >= uint(len(items)) {
		return 0
	}
	rl := &items[i]
	if d, ok := rl.rel[path]; ok {
		return rl.base + d
	}
	return 0
}

// API configures the admin HTTP API.
type API struct {
	// Listen is host:port; empty turns the API off.
	Listen string `yaml:"listen"`
	// TokenFile holds the bearer token /v1/ requests must carry (relative
	// to the configuration file); empty means no authentication, which is
	// only sensible on a loopback address.
	TokenFile string `yaml:"token_file"`
	// TokenEnv names an environment variable holding the token instead.
	TokenEnv string `yaml:"token_env"`
	// MaxConnections caps the connections the API holds open at once
	// (default DefaultAPIMaxConnections); more wait in the listen backlog.
	MaxConnections int `yaml:"max_connections"`
	// UIPublic serves the dashboard's pages (/ui/) and the reads they
	// make (GET /v1/overview, /v1/records/NAME, /v1/fleet, /v1/events)
	// without the token, as /metrics is; changes still need it.
	UIPublic bool `yaml:"ui_public"`
	// TLSCertFile and TLSKeyFile (both or neither; relative to the
	// configuration file) serve the API over HTTPS with this certificate
	// chain and key, read at every load (a reload picks up a renewed
	// certificate).
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// TLSCert is the pair of TLSCertFile and TLSKeyFile, read at load;
	// nil when they are not set.
	TLSCert *tls.Certificate `yaml:"-"`
	// tlsPEM is the hash of what TLSCert was parsed from (a reload
	// compares it).
	tlsPEM [sha256.Size]byte
	// Token is the token of TokenFile or TokenEnv, read once at load;
	// empty when neither is set.
	Token Secret `yaml:"-"`
}

// DefaultAPIMaxConnections is api.max_connections when unset: enough for
// operators, dashboards and a Prometheus, few enough that idle or slow
// clients cannot hold the node's descriptors.
const DefaultAPIMaxConnections = 64

// HealthOptions are server-wide health-check settings.
type HealthOptions struct {
	// StateFile, when set, keeps the last known target states and operator
	// overrides across restarts (relative to the configuration file).
	StateFile string `yaml:"state_file"`
	// FeedFile, when set, is a JSON file an operator's tooling writes to
	// set targets and pools up, down, drain or auto (with an optional
	// expiry); it is watched and applied on every change.
	FeedFile string `yaml:"feed_file"`
}

// QueryLog configures the sampled query log (off when Path is empty).
type QueryLog struct {
	// Path is a file (appended to) or "stdout".
	Path string `yaml:"path"`
	// Sample is the fraction of queries logged, 0 < sample <= 1 (default 1).
	Sample float64 `yaml:"sample"`
}
