// Package config owns steer's configuration file: its YAML schema, strict
// decoding (unknown keys are errors), defaults, and the checks that need
// nothing but the file itself. Every problem is reported as file:line.
//
// Values are decoded once, at load, into the types their consumers use:
// addresses and prefixes into netip values, query types through
// qtype.Parse, durations into Duration (a time.Duration), and the sections owned by
// a behaviour's package into that package's option struct, which carries
// the keys as yaml tags (rrl.Config, quorum.Config, health.Check,
// tcplimit.Limits). Each default is stated once, by the package owning the
// behaviour (rrl.Defaults, quorum.Defaults, health's Default*, tcplimit's
// Default* and Limits.SetDefaults); this package fills the keys a file
// leaves out from there. Every password or token file (api.token_file,
// anycast peers' password_file, fleet.etcd.password_file) is read once per
// load into a Secret, which never prints its value (secrets.go); consumers
// take it from the Config rather than reading the file again.
//
// StatePath (state.go) is the one directory a node keeps its state in, and
// the State* constants its layout.
//
// Loading the zone files and other data a configuration names is the job of
// package snapshot (snapshot.Build); this package only says what the
// operator wrote.
package config

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/qtype"
	"go.yaml.in/yaml/v3"
)

// Config is a decoded steer configuration file.
type Config struct {
	// Listen holds host:port addresses; each gets a UDP and a TCP listener.
	Listen []string `yaml:"listen"`
	// Identity is answered to CHAOS TXT id.server. and hostname.bind. and
	// returned in NSID (ServerIdentity). Empty, or "hide", means those
	// queries are refused; in a fleet, empty means the node's name, so
	// each node of an anycast set tells which one answered.
	Identity string `yaml:"identity"`
	// VersionBind is answered to CHAOS TXT version.bind.; "hide" refuses it.
	VersionBind string `yaml:"version_bind"`
	// TCP holds the TCP transport's limits (tcp.go).
	TCP   TCP    `yaml:"tcp"`
	Zones []Zone `yaml:"zones"`
	// Geo lists the geolocation databases steering consults.
	Geo Geo `yaml:"geo"`
	// ECS configures EDNS Client Subnet (RFC 7871) handling.
	ECS ECS `yaml:"ecs"`
	// Records are the steered names.
	Records []Record `yaml:"records"`
	// Policies are rule sets records refer to by name (Record.Policy).
	Policies map[string]Policy `yaml:"policies"`
	// HealthChecks are the named check templates pools refer to.
	HealthChecks map[string]HealthCheck `yaml:"health_checks"`
	// API configures the admin HTTP API (off when Listen is empty).
	API API `yaml:"api"`
	// Health holds server-wide health-check settings.
	Health HealthOptions `yaml:"health"`
	// QueryLog configures the query log.
	QueryLog QueryLog `yaml:"query_log"`
	// Latency configures the latency map (by: latency).
	Latency Latency `yaml:"latency"`
	// RUM, when set, takes real-user measurements on a beacon listener
	// of its own and feeds them into the latency map (rum.go).
	RUM *RUM `yaml:"rum"`
	// Load configures capacity feedback (load.go).
	Load LoadFeed `yaml:"load"`
	// Anycast, when set, announces service prefixes over BGP while healthy.
	Anycast *Anycast `yaml:"anycast"`
	// RRL configures response rate limiting (on by default).
	RRL RRL `yaml:"rrl"`
	// Cookies configures DNS cookies (on by default).
	Cookies Cookies `yaml:"cookies"`
	// Fleet, when set, makes the node one of a fleet on etcd.
	Fleet *Fleet `yaml:"fleet"`
	// Node is the answering node's identity (node.go): set when the file
	// has a node or a fleet section, nil otherwise.
	Node *Node `yaml:"node"`
	// Metrics chooses the optional series of /metrics (metrics.go).
	Metrics Metrics `yaml:"metrics"`
	// TSIG holds the keys zone transfers and NOTIFYs are signed with, by
	// name (the key's own name in the file).
	TSIG map[string]TSIGKey `yaml:"tsig"`
	// StateDir is the directory holding everything the node keeps across
	// restarts (state.go): "" is DefaultStateDir beside the file. Read it
	// through StatePath.
	StateDir string `yaml:"state_dir"`
	// Transfers holds the server-wide settings of zone transfers
	// (transfer.go).
	Transfers Transfers `yaml:"transfers"`
	// Signing holds the node-wide limits of online DNSSEC signatures
	// (dnssec.go).
	Signing Signing `yaml:"signing"`
	// Safety is the fleet-wide safety rule on overrides (safety.go):
	// records and policies may set their own.
	Safety *Safety `yaml:"safety"`

	// File is the configuration's path as given (for messages).
	File string `yaml:"-"`
	// FS, when non-nil, is where File and every path it names are read
	// from (the embedded demo). When nil, paths are on the local disk.
	FS fs.FS `yaml:"-"`
	// lines maps dotted key paths (e.g. "listen[1]") to their line in
	// File, except the paths of records and zones, which are in recLines
	// and zoneLines (one table per item of the sequence). See Line.
	lines     map[string]int
	recLines  []recLines
	zoneLines []recLines

	// text is the bytes parsed, for the dashboard's record text and the
	// record cache; a file with no records keeps only their digest
	// (dropText), which LoadAgain compares: a hosting provider's file of
	// 100,000 zones is 6 MB.
	text    string
	textSum [sha256.Size]byte
	cache   *recordCache // the records of text by their bytes, for LoadAgain; nil when not reusable
	// reused is how many records LoadAgain took from the configuration it
	// was given instead of decoding them (for tests).
	reused int
}

// Zone names a zone served from an RFC 1035 master file, or, with
// Primaries, one transferred in from primary servers (see transfer.go).
type Zone struct {
	Origin string `yaml:"origin"`
	File   string `yaml:"file"`
	// Primaries make the zone a secondary: host:port addresses (port 53
	// when left out) it is transferred from, tried in order.
	Primaries []string `yaml:"primaries"`
	// TSIG names the key (of the tsig section) transfers from the
	// primaries and their NOTIFYs are signed with; "" for none.
	TSIG string `yaml:"tsig"`
	// Secondaries may transfer the zone out, and are notified of each
	// new serial.
	Secondaries []Secondary `yaml:"secondaries"`
	// IXFRJournal is how many serial changes are kept to answer IXFR:
	// 0..10000; default 20. Older serials get an AXFR-style answer.
	IXFRJournal *int `yaml:"ixfr_journal"`
	// DNSSEC, when set, signs the zone (dnssec.go): its keys' base
	// paths as written (KeyBases resolves them, ZoneKeys reads them), and
	// Validity and Refresh with their defaults filled in.
	DNSSEC *dnssec.Config `yaml:"dnssec"`
	// Line is where this entry starts in the configuration file.
	Line int `yaml:"-"`
}

// Duration is a time.Duration written as a Go duration string ("10s").
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	// A *yaml.TypeError lets the decoder go on and report every problem;
	// any other error would stop it at this one.
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a duration must be a string such as 10s", n.Line)}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q (use Go syntax such as 500ms, 10s, 5m)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// Defaults applied to keys the file leaves out.
const (
	// VersionHidden as version_bind refuses version.bind queries.
	VersionHidden = "hide"
	// IdentityHidden as identity refuses id.server., hostname.bind. and
	// NSID (in a fleet, where an empty identity is the node's name).
	IdentityHidden = "hide"
)

// ServerIdentity is the identity answered to id.server., hostname.bind.
// and NSID; "" refuses them.
func (c *Config) ServerIdentity() string {
	if c.Identity == IdentityHidden {
		return ""
	}
	return c.Identity
}

// DefaultListen is used when the file has no listen key.
var DefaultListen = []string{"127.0.0.1:5353", "[::1]:5353"}

//go:embed demo
var demoFS embed.FS

// DemoPath is the path of the embedded demo configuration inside DemoFS.
const DemoPath = "demo/steer.yaml"

// DemoFS returns the embedded demo configuration and its zone files.
func DemoFS() fs.FS { return demoFS }

// Load reads and checks the configuration at path on the local disk.
func Load(path string) (*Config, error) {
	return LoadFS(nil, path)
}

// LoadDemo reads the embedded demo configuration.
func LoadDemo() (*Config, error) {
	return LoadFS(demoFS, DemoPath)
}

// LoadFS reads and checks the configuration at p, from fsys when it is
// non-nil and from the local disk otherwise. The error, when not nil, is
// diag.Problems.
func LoadFS(fsys fs.FS, p string) (*Config, error) {
	data, err := ReadFile(fsys, p)
	if err != nil {
		return nil, diag.Problems{{File: p, Msg: err.Error()}}
	}
	return Parse(fsys, p, data)
}

// LoadAgain is LoadFS for a reload: when the file at p reads back the
// bytes prev was parsed from, it reads the secret files again (a rotated
// token or password is a reason to reload) and, when they hold what they
// held, returns prev itself (same reports true), which the caller must
// treat as read-only, as every loaded Config is; when a secret changed, it
// returns a copy of prev holding the new secrets.
//
// Otherwise the result is that of Parse, but the records whose text is
// unchanged are taken from prev instead of being decoded again (see
// reparse); the Config returned shares them with prev.
func LoadAgain(fsys fs.FS, p string, prev *Config) (c *Config, same bool, err error) {
	data, err := ReadFile(fsys, p)
	if err != nil {
		return nil, false, diag.Problems{{File: p, Msg: err.Error()}}
	}
	if prev != nil && prev.File == p && sameFS(prev.FS, fsys) && prev.textSum == sha256.Sum256(data) {
		return prev.withSecretsReread()
	}
	if c := reparse(fsys, p, data, prev); c != nil {
		return c, false, nil
	}
	c, err = Parse(fsys, p, data)
	return c, false, err
}

// sameFS reports whether a and b are the same file system; values of an
// incomparable type (a map such as fstest.MapFS) never are.
func sameFS(a, b fs.FS) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// ReadFile reads p from fsys, or from the local disk when fsys is nil.
func ReadFile(fsys fs.FS, p string) ([]byte, error) {
	if fsys == nil {
		return os.ReadFile(p)
	}
	return fs.ReadFile(fsys, p)
}

// Resolve returns p relative to the directory of the configuration file,
// unless p is absolute.
func (c *Config) Resolve(p string) string {
	if c.FS != nil {
		if path.IsAbs(p) {
			return strings.TrimPrefix(path.Clean(p), "/")
		}
		return path.Join(path.Dir(c.File), p)
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse decodes data (the contents of file) strictly and checks it.
func Parse(fsys fs.FS, file string, data []byte) (*Config, error) {
	var probs diag.Problems
	c := &Config{File: file, FS: fsys, lines: map[string]int{}, text: string(data)}
	if za := decodeZonesApart(c.text); za != nil { // a long zones list (zonesplit.go)
		w := keyWalker{probs: &probs, file: file, lines: c.lines, recs: &c.recLines, rec: -1}
		w.walk(za.root, "", reflect.TypeOf(c), true)
		if len(probs) == 0 && za.root.Decode(c) == nil {
			c.Zones, c.zoneLines = za.zones, za.lines
			shareRecLines(c.recLines)
			shareRecLines(c.zoneLines)
			return c.finish(za.root)
		}
		// The file in one piece reports the problems.
		probs = nil
		c = &Config{File: file, FS: fsys, lines: map[string]int{}, text: c.text}
	}
	var root *yaml.Node
	{
		var doc yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				probs.Add(file, 0, "the file is empty")
			} else {
				AddYAMLError(&probs, file, err)
			}
			return nil, probs.Err()
		}
		root = &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
	}
	if root.Kind != yaml.MappingNode {
		probs.Add(file, root.Line, "the top level must be a mapping of keys such as listen and zones")
		return nil, probs.Err()
	}
	w := keyWalker{probs: &probs, file: file, lines: c.lines, recs: &c.recLines, zones: &c.zoneLines, rec: -1}
	w.walk(root, "", reflect.TypeOf(c), true)
	shareRecLines(c.recLines)
	shareRecLines(c.zoneLines)
	if err := root.Decode(c); err != nil {
		AddYAMLError(&probs, file, err)
	}
	if len(probs) > 0 {
		c.decodeValidity(root, &probs)
		return nil, probs.Err()
	}
	return c.finish(root)
}

// finish is the end of Parse, once the tree root is decoded into c
// without a problem.
func (c *Config) finish(root *yaml.Node) (*Config, error) {
	var probs diag.Problems
	c.decodeValidity(root, &probs)
	if len(probs) > 0 {
		return nil, probs.Err()
	}
	c.applyDefaults()
	c.check(&probs)
	if err := probs.Err(); err != nil {
		return nil, err
	}
	c.cache = cacheRecords(c, root)
	c.dropText()
	return c, nil
}

// AddYAMLError adds a YAML decoder's errors to probs, each at its line of
// file (the configuration's and the simulator's scenario files both
// report them so).
func AddYAMLError(probs *diag.Problems, file string, err error) {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, m := range msgs {
		if sm := yamlLine.FindStringSubmatch(m); sm != nil {
			n, _ := strconv.Atoi(sm[1])
			probs.Add(file, n, "%s", sm[2])
		} else {
			probs.Add(file, 0, "%s", strings.TrimPrefix(m, "yaml: "))
		}
	}
}

func (c *Config) applyDefaults() {
	if c.Listen == nil {
		c.Listen = append([]string(nil), DefaultListen...) // not shared with other configs
	}
	c.TCP.applyDefaults()
	if c.ECS.Enabled == nil {
		t := true
		c.ECS.Enabled = &t
	}
	if c.ECS.MaxSourceV4 == 0 {
		c.ECS.MaxSourceV4 = DefaultMaxSourceV4
	}
	if c.ECS.MaxSourceV6 == 0 {
		c.ECS.MaxSourceV6 = DefaultMaxSourceV6
	}
	if c.Geo.Databases == nil {
		c.Geo.Databases = []string{"embedded"}
	}
	for i := range c.Records {
		c.Records[i].Line = c.RecordLine(i, "")
		for n, p := range c.Records[i].Pools {
			if p == nil { // "name:" with nothing after it: a pool with nothing set
				c.Records[i].Pools[n] = &Pool{}
			}
		}
	}
	if c.VersionBind == "" {
		c.VersionBind = VersionHidden
	}
	c.applyAbuseDefaults()
	c.applyFleetDefaults()
	c.applyNodeDefaults()
	if c.Fleet != nil && c.Identity == "" && c.Node != nil {
		c.Identity = c.Node.Name
	}
	c.applyTransferDefaults()
	c.applyDNSSECDefaults()
}

func (c *Config) check(probs *diag.Problems) {
	f := c.File
	if len(c.Listen) == 0 {
		probs.Add(f, c.Line("listen"), "listen: at least one address is needed")
	}
	seen := map[string]bool{}
	for i, l := range c.Listen {
		ln := c.Line(fmt.Sprintf("listen[%d]", i))
		host, port, err := net.SplitHostPort(l)
		if err != nil {
			probs.Add(f, ln, "listen: %q is not host:port (write IPv6 as [::1]:53)", l)
			continue
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "" && host != "localhost" {
			probs.Add(f, ln, "listen: %q: %q is not an IP address", l, host)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			probs.Add(f, ln, "listen: %q: bad port %q", l, port)
		}
		if seen[l] {
			probs.Add(f, ln, "listen: %q is listed twice", l)
		}
		seen[l] = true
	}
	if len(c.Identity) > 255 {
		probs.Add(f, c.Line("identity"), "identity: longer than 255 bytes")
	}
	if len(c.VersionBind) > 255 {
		probs.Add(f, c.Line("version_bind"), "version_bind: longer than 255 bytes")
	}
	c.checkTCP(probs)
	c.checkTransfers(probs)
	c.checkAbuse(probs)
	c.checkFleet(probs)
	c.checkNode(probs)
	if c.ECS.MaxSourceV4 < 0 || c.ECS.MaxSourceV4 > 32 {
		probs.Add(f, c.Line("ecs.max_source_v4"), "ecs.max_source_v4: %d is not between 1 and 32", c.ECS.MaxSourceV4)
	}
	if c.ECS.MaxSourceV6 < 0 || c.ECS.MaxSourceV6 > 128 {
		probs.Add(f, c.Line("ecs.max_source_v6"), "ecs.max_source_v6: %d is not between 1 and 128", c.ECS.MaxSourceV6)
	}
	if c.API.Listen != "" {
		if _, _, err := net.SplitHostPort(c.API.Listen); err != nil {
			probs.Add(f, c.Line("api.listen"), "api.listen: %q is not host:port", c.API.Listen)
		}
	} else {
		for _, k := range []struct {
			key string
			set bool
		}{{"api.token_file", c.API.TokenFile != ""}, {"api.ui_public", c.API.UIPublic}, {"api.tls_cert_file", c.API.TLSCertFile != ""}, {"api.tls_key_file", c.API.TLSKeyFile != ""}} {
			if k.set {
				probs.Add(f, c.Line(k.key), "%s without api.listen", k.key)
			}
		}
	}
	switch {
	case c.API.TLSCertFile != "" && c.API.TLSKeyFile == "":
		probs.Add(f, c.Line("api.tls_cert_file"), "api.tls_cert_file without api.tls_key_file: give both or neither")
	case c.API.TLSKeyFile != "" && c.API.TLSCertFile == "":
		probs.Add(f, c.Line("api.tls_key_file"), "api.tls_key_file without api.tls_cert_file: give both or neither")
	}
	if c.API.MaxConnections < 0 {
		probs.Add(f, c.Line("api.max_connections"), "api.max_connections: %d is negative (0 or unset: %d)", c.API.MaxConnections, DefaultAPIMaxConnections)
	}
	if c.QueryLog.Path != "" && c.QueryLog.Sample == 0 {
		c.QueryLog.Sample = 1
	}
	if c.QueryLog.Sample < 0 || c.QueryLog.Sample > 1 {
		probs.Add(f, c.Line("query_log.sample"), "query_log.sample: %v is not between 0 and 1", c.QueryLog.Sample)
	}
	if c.API.TokenFile != "" && c.API.TokenEnv != "" {
		probs.Add(f, c.Line("api.token_env"), "api: give token_file or token_env, not both")
	}
	c.checkLatency(probs)
	c.checkRUM(probs)
	c.checkLoad(probs)
	c.checkMetrics(probs)
	if len(c.Geo.Databases) == 0 {
		probs.Add(f, c.Line("geo.databases"), "geo.databases: list at least one database (or embedded)")
	}
	c.checkAnycast(probs)
	origins := make(map[string]int, len(c.Zones))
	for i := range c.Zones {
		z := &c.Zones[i]
		// Line("zones[i].origin") without building the path: 100,000
		// zones are checked at every start.
		z.Line = itemLine(c.zoneLines, i, "")
		originLine := itemLine(c.zoneLines, i, ".origin")
		if z.Origin == "" {
			probs.Add(f, z.Line, "zones: an entry has no origin")
			continue
		}
		if _, ok := dns.IsDomainName(z.Origin); !ok {
			probs.Add(f, originLine, "zones: origin %q is not a domain name", z.Origin)
			continue
		}
		canon := dns.CanonicalName(z.Origin)
		if first, dup := origins[canon]; dup {
			probs.Add(f, originLine, "zones: origin %s is already served (line %d)", canon, first)
			continue
		}
		origins[canon] = originLine
		switch {
		case z.File == "" && len(z.Primaries) == 0:
			probs.Add(f, z.Line, "zones: %s has no file (or primaries, to transfer it in)", canon)
		case z.File != "" && len(z.Primaries) > 0:
			probs.Add(f, itemLine(c.zoneLines, i, ".primaries"), "zones: %s has both a file and primaries; a zone is read from one or transferred from the other", canon)
		}
		c.checkTransfer(probs, i)
		c.checkDNSSEC(probs, i)
	}
	c.checkSigning(probs)
	c.checkTSIG(probs)
	c.checkSafety(probs)
	c.checkHealthChecks(probs)
	c.readSecrets(probs)
}

// checkHealthChecks decodes what the health_checks templates write as
// text into their health.Check; the snapshot validates the rest.
func (c *Config) checkHealthChecks(probs *diag.Problems) {
	for name, hc := range c.HealthChecks {
		hc.Check.Name = name
		hc.Check.Interval, hc.Check.Timeout = time.Duration(hc.Interval), time.Duration(hc.Timeout)
		hc.Check.QType = 0
		if hc.QType != "" {
			t, err := qtype.Parse(hc.QType)
			if err != nil {
				probs.Add(c.File, c.Line("health_checks."+name+".qtype"), "health check %s: unknown qtype %q", name, hc.QType)
			}
			hc.Check.QType = t
		}
		c.HealthChecks[name] = hc
	}
}
