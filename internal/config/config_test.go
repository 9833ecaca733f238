package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/tcplimit"
)

func parse(t *testing.T, data string) (*config.Config, diag.Problems) {
	t.Helper()
	c, err := config.Parse(nil, "steer.yaml", []byte(data))
	if err == nil {
		if c == nil {
			t.Fatal("nil config without error")
		}
		return c, nil
	}
	var ps diag.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, not diag.Problems: %v", err, err)
	}
	if c != nil {
		t.Errorf("config returned along with errors")
	}
	if len(ps) == 0 {
		t.Fatal("empty diag.Problems as error")
	}
	return nil, ps
}

func mustParse(t *testing.T, data string) *config.Config {
	t.Helper()
	c, ps := parse(t, data)
	if ps != nil {
		t.Fatalf("unexpected problems:\n%v", ps)
	}
	return c
}

type prob struct {
	line   int
	phrase string
}

// checkProblems requires exactly the problems want, all in steer.yaml.
func checkProblems(t *testing.T, got diag.Problems, want []prob) {
	t.Helper()
	for _, w := range want {
		found := false
		for _, p := range got {
			if p.File == "steer.yaml" && p.Line == w.line && strings.Contains(p.Msg, w.phrase) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("missing steer.yaml:%d containing %q in:\n%v", w.line, w.phrase, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(got), len(want), got)
	}
}

const full = `# a full configuration
listen:
  - "192.0.2.1:53"
  - "[2001:db8::1]:53"
  - ":5300"
identity: ns1.example.com
version_bind: "steer 1.2.3"
tcp:
  max_connections: 50
  idle_timeout: 2m30s
zones:
  - origin: example.com
    file: zones/example.com.zone
  - origin: Example.NET.
    file: /var/lib/steer/example.net.zone
`

func TestFullConfig(t *testing.T) {
	c := mustParse(t, full)
	if want := []string{"192.0.2.1:53", "[2001:db8::1]:53", ":5300"}; !slices.Equal(c.Listen, want) {
		t.Errorf("Listen = %q, want %q", c.Listen, want)
	}
	if c.Identity != "ns1.example.com" {
		t.Errorf("Identity = %q", c.Identity)
	}
	if c.VersionBind != "steer 1.2.3" {
		t.Errorf("VersionBind = %q", c.VersionBind)
	}
	if c.TCP.MaxConns != 50 {
		t.Errorf("MaxConnections = %d", c.TCP.MaxConns)
	}
	if time.Duration(c.TCP.IdleTimeout) != 150*time.Second {
		t.Errorf("IdleTimeout = %v", time.Duration(c.TCP.IdleTimeout))
	}
	want := []config.Zone{
		{Origin: "example.com", File: "zones/example.com.zone", Line: 12},
		{Origin: "Example.NET.", File: "/var/lib/steer/example.net.zone", Line: 14},
	}
	if !reflect.DeepEqual(c.Zones, want) {
		t.Errorf("Zones = %+v, want %+v", c.Zones, want)
	}
	if c.File != "steer.yaml" || c.FS != nil {
		t.Errorf("File %q FS %v", c.File, c.FS)
	}
	for key, line := range map[string]int{
		"listen": 2, "listen[0]": 3, "listen[2]": 5, "identity": 6, "version_bind": 7,
		"tcp": 8, "tcp.max_connections": 9, "tcp.idle_timeout": 10,
		"zones": 11, "zones[0]": 12, "zones[0].origin": 12, "zones[0].file": 13, "zones[1].origin": 14,
	} {
		if got := c.Line(key); got != line {
			t.Errorf("Line(%q) = %d, want %d", key, got, line)
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		listen     []string
		version    string
		maxConns   int
		idle       time.Duration
	}{
		{"nothing but an identity", "identity: x\n", config.DefaultListen, "hide", 1000, 10 * time.Second},
		{"null listen", "listen:\nidentity: x\n", config.DefaultListen, "hide", 1000, 10 * time.Second},
		{"only comments and zones", "# c\nzones: []\n", config.DefaultListen, "hide", 1000, 10 * time.Second},
		{"partial tcp", "tcp:\n  max_connections: 7\n", config.DefaultListen, "hide", 7, 10 * time.Second},
		{"other partial tcp", "tcp: { idle_timeout: 500ms }\n", config.DefaultListen, "hide", 1000, 500 * time.Millisecond},
		{"empty tcp", "tcp: {}\nversion_bind: \"\"\n", config.DefaultListen, "hide", 1000, 10 * time.Second},
		{"explicit values", "listen: [\"127.0.0.1:53\"]\nversion_bind: v1\n", []string{"127.0.0.1:53"}, "v1", 1000, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.data)
			if !slices.Equal(c.Listen, tc.listen) {
				t.Errorf("Listen = %q, want %q", c.Listen, tc.listen)
			}
			if c.VersionBind != tc.version {
				t.Errorf("VersionBind = %q, want %q", c.VersionBind, tc.version)
			}
			if c.TCP.MaxConns != tc.maxConns {
				t.Errorf("MaxConnections = %d, want %d", c.TCP.MaxConns, tc.maxConns)
			}
			if time.Duration(c.TCP.IdleTimeout) != tc.idle {
				t.Errorf("IdleTimeout = %v, want %v", time.Duration(c.TCP.IdleTimeout), tc.idle)
			}
			if c.Identity != "" && c.Identity != "x" {
				t.Errorf("Identity = %q", c.Identity)
			}
		})
	}
	if want := []string{"127.0.0.1:5353", "[::1]:5353"}; !slices.Equal(config.DefaultListen, want) {
		t.Errorf("DefaultListen = %q, want %q", config.DefaultListen, want)
	}
	if tcplimit.DefaultMaxConns != 1000 || tcplimit.DefaultIdle != 10*time.Second || config.VersionHidden != "hide" {
		t.Error("default constants changed")
	}
}

func TestDefaultListenNotShared(t *testing.T) {
	c := mustParse(t, "identity: x\n")
	c.Listen[0] = "changed"
	defer func() { config.DefaultListen[0] = "127.0.0.1:5353" }()
	if d := mustParse(t, "identity: y\n"); d.Listen[0] != "127.0.0.1:5353" {
		t.Errorf("changing one config's Listen changed another's: %q", d.Listen)
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want []prob
	}{
		{"unknown top-level key", "listn: [\":53\"]\n", []prob{{1, `unknown key "listn" at the top level`}}},
		{"unknown keys everywhere, all at once", `listn: [":53"]
identity: x
tcp:
  max_conns: 5
  idle_timeout: 1s
zones:
  - origin: example.com
    file: a.zone
  - orign: example.net
    file: b.zone
    extra: 1
verison_bind: v
`, []prob{
			{1, `unknown key "listn" at the top level`},
			{4, `unknown key "max_conns" in tcp`},
			{9, `unknown key "orign" in zones[1]`},
			{11, `unknown key "extra" in zones[1]`},
			{12, `unknown key "verison_bind" at the top level`},
		}},
		{"unknown key lists the known ones", "tcp: {max_conns: 1}\n", []prob{{1, "known keys: first_query_timeout, idle_timeout, max_connections, per_prefix"}}},
		{"unknown key in a flow mapping", "zones: [{origin: a.example, orign: b}]\n", []prob{{1, `unknown key "orign" in zones[0]`}}},
		{"type error", "identity: x\ntcp:\n  max_connections: \"lots\"\n", []prob{{3, "lots"}}},
		{"type error on a list", "listen: 53\n", []prob{{1, "cannot unmarshal"}}},
		{"bad duration", "tcp:\n  idle_timeout: 10 parsecs\n", []prob{{2, `invalid duration "10 parsecs"`}}},
		{"duration without unit", "tcp:\n  idle_timeout: 10\n", []prob{{2, "invalid duration"}}},
		{"duration as a list", "tcp:\n  idle_timeout: [1s]\n", []prob{{2, "duration"}}},
		{"type and duration errors together", "tcp:\n  max_connections: lots\n  idle_timeout: forever\n", []prob{
			{2, "lots"},
			{3, "invalid duration"},
		}},
		{"negative values", "tcp:\n  max_connections: -1\n  idle_timeout: -5s\n", []prob{
			{2, "tcp.max_connections: must be positive"},
			{3, "tcp.idle_timeout: must be positive"},
		}},
		{"more connections than the server takes", "tcp:\n  max_connections: 2000000\n", []prob{
			{2, "tcp.max_connections: 2000000 is more than 1048576"},
		}},
		{"duplicate origins", `zones:
  - origin: example.com
    file: a.zone
  - origin: example.net
    file: b.zone
  - origin: Example.COM.
    file: c.zone
  - origin: EXAMPLE.net
    file: d.zone
`, []prob{
			{6, "origin example.com. is already served (line 2)"},
			{8, "origin example.net. is already served (line 4)"},
		}},
		{"zone without origin", "zones:\n  - file: a.zone\n", []prob{{2, "no origin"}}},
		{"zone without file", "zones:\n  - origin: example.com\n", []prob{{2, "example.com. has no file"}}},
		{"bad origin", "zones:\n  - file: a.zone\n    origin: \"exa mple..com\"\n", []prob{{3, "is not a domain name"}}},
		{"listen without port", "listen:\n  - 127.0.0.1\n", []prob{{2, "not host:port"}}},
		{"listen IPv6 without brackets", "listen: [\"::1:53\"]\n", []prob{{1, "not host:port"}}},
		{"listen on a name", "listen:\n  - \"127.0.0.1:53\"\n  - \"ns.example.com:53\"\n", []prob{{3, "is not an IP address"}}},
		{"listen bad port", "listen:\n  - \"127.0.0.1:65536\"\n  - \"127.0.0.1:dns\"\n  - \"127.0.0.1:-1\"\n", []prob{
			{2, "bad port"}, {3, "bad port"}, {4, "bad port"},
		}},
		{"listen twice", "listen:\n  - \"127.0.0.1:53\"\n  - \"[::1]:53\"\n  - \"127.0.0.1:53\"\n", []prob{{4, "listed twice"}}},
		{"listen empty list", "identity: x\nlisten: []\n", []prob{{2, "at least one address"}}},
		{"identity too long", "identity: " + strings.Repeat("x", 256) + "\n", []prob{{1, "identity: longer than 255"}}},
		{"version_bind too long", "\nversion_bind: " + strings.Repeat("x", 256) + "\n", []prob{{2, "version_bind: longer than 255"}}},
		{"several check problems at once", `listen: ["nope", "127.0.0.1:53"]
zones:
  - origin: example.com
  - origin: example.com
    file: b.zone
`, []prob{
			{1, "not host:port"},
			{3, "has no file"},
			{4, "already served (line 3)"},
		}},
		{"empty file", "", []prob{{0, "empty"}}},
		{"only comments", "# nothing here\n\n", []prob{{0, "empty"}}},
		{"top level is a list", "- a\n- b\n", []prob{{1, "top level must be a mapping"}}},
		{"top level is a scalar", "\nhello\n", []prob{{2, "top level must be a mapping"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ps := parse(t, tc.data)
			if ps == nil {
				t.Fatal("no problems reported")
			}
			checkProblems(t, ps, tc.want)
			for i := 1; i < len(ps); i++ {
				if ps[i].Line < ps[i-1].Line {
					t.Errorf("problems are not sorted by line: %v", ps)
				}
			}
		})
	}
}

// TestSyntaxErrors checks that YAML syntax errors become one problem with a
// line and a clean message. The line is the YAML parser's, which for some
// errors is that of the construct before the broken one, so only a range is
// required.
func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		data     string
		min, max int
		phrase   string
	}{
		{"identity: x\nlisten: [\"127.0.0.1:53\"\nversion_bind: x\n", 1, 3, "did not find expected ',' or ']'"},
		{"identity: x\ntcp:\n  max_connections: 5\n idle_timeout: 1s\n", 2, 4, "did not find expected key"},
		{"identity: x\nversion_bind: \"unterminated\n", 2, 3, "found unexpected end of stream"},
	} {
		_, ps := parse(t, tc.data)
		if len(ps) != 1 {
			t.Errorf("%q: got %d problems, want 1: %v", tc.data, len(ps), ps)
			continue
		}
		p := ps[0]
		if p.File != "steer.yaml" || p.Line < tc.min || p.Line > tc.max || !strings.Contains(p.Msg, tc.phrase) ||
			strings.HasPrefix(p.Msg, "yaml:") || strings.HasPrefix(p.Msg, "line ") {
			t.Errorf("%q: problem %q, want steer.yaml:%d-%d: %s", tc.data, p, tc.min, tc.max, tc.phrase)
		}
	}
}

func TestResolve(t *testing.T) {
	abs := filepath.Join(string(filepath.Separator), "srv", "zones", "a.zone")
	for _, tc := range []struct {
		file, p, want string
	}{
		{"steer.yaml", "zones/a.zone", filepath.Join("zones", "a.zone")},
		{filepath.Join("etc", "steer", "steer.yaml"), "a.zone", filepath.Join("etc", "steer", "a.zone")},
		{filepath.Join("etc", "steer", "steer.yaml"), "../z/a.zone", filepath.Join("etc", "z", "a.zone")},
		{filepath.Join(string(filepath.Separator), "etc", "steer.yaml"), "zones/a.zone", filepath.Join(string(filepath.Separator), "etc", "zones", "a.zone")},
		{filepath.Join("etc", "steer.yaml"), abs, abs},
	} {
		c := &config.Config{File: tc.file}
		if got := c.Resolve(tc.p); got != tc.want {
			t.Errorf("Resolve(%q) from %q = %q, want %q", tc.p, tc.file, got, tc.want)
		}
	}
	// With an fs.FS, paths are slash-separated and relative to its root.
	for _, tc := range []struct {
		file, p, want string
	}{
		{"demo/steer.yaml", "zones/example.com.zone", "demo/zones/example.com.zone"},
		{"steer.yaml", "a.zone", "a.zone"},
		{"demo/steer.yaml", "/zones/a.zone", "zones/a.zone"},
		{"demo/steer.yaml", "/x/../zones/a.zone", "zones/a.zone"},
		{"a/b/steer.yaml", "../c.zone", "a/c.zone"},
	} {
		c := &config.Config{File: tc.file, FS: config.DemoFS()}
		if got := c.Resolve(tc.p); got != tc.want {
			t.Errorf("FS Resolve(%q) from %q = %q, want %q", tc.p, tc.file, got, tc.want)
		}
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(p, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != p || c.FS != nil || len(c.Zones) != 2 {
		t.Errorf("File %q FS %v zones %d", c.File, c.FS, len(c.Zones))
	}
	if got, want := c.Resolve(c.Zones[0].File), filepath.Join(dir, "zones", "example.com.zone"); got != want {
		t.Errorf("Resolve = %q, want %q", got, want)
	}

	// Problems name the file as given.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("identity: x\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(bad)
	var ps diag.Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].File != bad || ps[0].Line != 2 {
		t.Errorf("Load(bad) = %v, want one problem at %s:2", err, bad)
	}
	if want := bad + `:2: unknown key "bogus"`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error text %q does not start with %q", err, want)
	}

	// A missing file is one problem naming it.
	missing := filepath.Join(dir, "missing.yaml")
	_, err = config.Load(missing)
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].File != missing || ps[0].Line != 0 {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestTestdataConfigs(t *testing.T) {
	c, err := config.Load(filepath.Join("testdata", "valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Zones) != 1 || c.Zones[0].Line != 9 || c.Resolve(c.Zones[0].File) != filepath.Join("testdata", "zones", "example.org.zone") {
		t.Errorf("zones %+v", c.Zones)
	}
	_, err = config.Load(filepath.Join("testdata", "unknown-keys.yaml"))
	var ps diag.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Load = %v", err)
	}
	f := filepath.Join("testdata", "unknown-keys.yaml")
	want := []diag.Problem{
		{File: f, Line: 3},
		{File: f, Line: 6},
		{File: f, Line: 11},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d: %v", len(ps), len(want), ps)
	}
	for i, w := range want {
		if ps[i].File != w.File || ps[i].Line != w.Line || !strings.Contains(ps[i].Msg, "unknown key") {
			t.Errorf("problem %d = %v, want an unknown key at %s:%d", i, ps[i], w.File, w.Line)
		}
	}
}

func TestLoadDemo(t *testing.T) {
	c, err := config.LoadDemo()
	if err != nil {
		t.Fatal(err)
	}
	if c.File != config.DemoPath || c.FS == nil {
		t.Errorf("File %q FS %v", c.File, c.FS)
	}
	if c.Identity != "steer-demo" || c.VersionBind != "hide" || c.TCP.MaxConns != 1000 ||
		time.Duration(c.TCP.IdleTimeout) != 10*time.Second {
		t.Errorf("demo config %+v", c)
	}
	if len(c.Zones) != 1 || c.Zones[0].Origin != "example.com" {
		t.Fatalf("demo zones %+v", c.Zones)
	}
	if _, err := config.ReadFile(c.FS, c.Resolve(c.Zones[0].File)); err != nil {
		t.Errorf("demo zone file: %v", err)
	}

	snap, warns, err := snapshot.Build(c)
	if err != nil {
		t.Fatalf("Build(demo): %v", err)
	}
	if len(warns) != 0 {
		t.Errorf("Build(demo) warnings:\n%v", warns)
	}
	z := snap.Zones.Find("example.com.")
	if z == nil || z.Origin != "example.com." || len(snap.Zones.Zones()) != 1 {
		t.Fatalf("demo zones: %v", snap.Zones.Zones())
	}
	a := snap.Zones.Lookup("static.example.com.", dns.TypeAAAA)
	var got []string
	for _, rr := range a.Answer {
		got = append(got, rr.String())
	}
	want := []string{"static.example.com.\t3600\tIN\tAAAA\t2001:db8::80"}
	if a.Rcode != dns.RcodeSuccess || !a.Authoritative || !slices.Equal(got, want) {
		t.Errorf("demo static.example.com. AAAA: %s %v %q", dns.RcodeToString[a.Rcode], a.Authoritative, got)
	}
}

// TestAbuseKeys reads the rrl, cookies and new tcp keys with their
// defaults, and names the key and line of each value out of range.
func TestAbuseKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "steer.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := config.Load(write("identity: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.RRL
	if !r.Enabled || r.ResponsesPerSecond != 20 || r.AllPerSecond != 1000 || time.Duration(r.Window) != 15*time.Second || r.Config.Window != 15 ||
		r.Slip != 2 || r.IPv4Prefix != 24 || r.IPv6Prefix != 56 || !r.ECSAware || r.LogOnly || r.TableSize != 1<<18 {
		t.Errorf("rrl defaults: %+v", r)
	}
	if fmt.Sprint(r.Config.Exempt) != "[127.0.0.0/8 ::1/128]" {
		t.Errorf("rrl.exempt default: %v, want loopback", r.Config.Exempt)
	}
	if c, err := config.Load(write("rrl: { exempt: [] }\n")); err != nil || len(c.RRL.Config.Exempt) != 0 {
		t.Errorf("rrl.exempt: [] must exempt nothing: %v %v", err, c.RRL.Config.Exempt)
	}
	if !*c.Cookies.Enabled || c.Cookies.MaxNoCookieUDP != 1232 || c.Cookies.SecretFile != "" {
		t.Errorf("cookies defaults: %+v", c.Cookies)
	}
	if c.TCP.PerPrefix != 32 || c.TCP.FirstQuery != 2*time.Second {
		t.Errorf("tcp defaults: %+v", c.TCP)
	}
	c, err = config.Load(write(`rrl:
  responses_per_second: 5
  all_per_second: 0
  window: 30s
  slip: 0
  exempt: [192.0.2.0/24, "2001:db8::1"]
  log_only: true
cookies: { enabled: false, secret_file: s.key, max_nocookie_udp: 512 }
tcp: { max_connections: 10, per_prefix: 4, first_query_timeout: 500ms }
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RRL.ResponsesPerSecond != 5 || c.RRL.AllPerSecond != 0 || c.RRL.Slip != 0 || !c.RRL.LogOnly || c.RRL.Config.Window != 30 ||
		fmt.Sprint(c.RRL.Config.Exempt) != "[192.0.2.0/24 2001:db8::1/128]" {
		t.Errorf("rrl: %+v", c.RRL)
	}
	if *c.Cookies.Enabled || c.Cookies.SecretFile != "s.key" || c.Cookies.MaxNoCookieUDP != 512 || c.TCP.PerPrefix != 4 {
		t.Errorf("cookies, tcp: %+v %+v", c.Cookies, c.TCP)
	}
	_, err = config.Load(write(`rrl:
  responses_per_second: 0
  window: 1500ms
  slip: 11
  ipv4_prefix: 33
  exempt: [bogus]
  table_size: 100
cookies:
  max_nocookie_udp: 4096
tcp:
  max_connections: 10
  per_prefix: 11
  first_query_timeout: 10ms
`))
	if err == nil {
		t.Fatal("out-of-range values accepted")
	}
	for _, want := range []string{
		"steer.yaml:2: rrl.responses_per_second: 0 is not between 1",
		"steer.yaml:3: rrl.window: 1.5s is not a whole number of seconds",
		"steer.yaml:4: rrl.slip: 11",
		"steer.yaml:5: rrl.ipv4_prefix: 33",
		`steer.yaml:6: rrl.exempt[0]: "bogus"`,
		"steer.yaml:7: rrl.table_size: 100",
		"steer.yaml:9: cookies.max_nocookie_udp: 4096",
		"steer.yaml:12: tcp.per_prefix: 11",
		"steer.yaml:13: tcp.first_query_timeout: 10ms",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestFleetKeys reads the fleet section with its defaults and names the
// line of each bad value.
func TestFleetKeys(t *testing.T) {
	c, err := config.Parse(nil, "steer.yaml", []byte(`fleet:
  node: fra-1
  region: eu
  etcd:
    endpoints: [https://etcd-a:2379, https://etcd-b:2379]
    prefix: steer/v1/
    tls: { ca: ca.pem, cert: node.pem, key: node-key.pem }
`))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Fleet
	if f == nil || f.Node != "fra-1" || f.Region != "eu" || f.Etcd.Prefix != "/steer/v1" || time.Duration(f.LeaseTTL) != 10*time.Second ||
		time.Duration(f.ViewGrace) != time.Minute || f.HealthQuorum.HealthyAbove != 0.18 || f.HealthQuorum.MinObservers != 3 ||
		time.Duration(f.HealthQuorum.HoldDown) != 10*time.Second || f.HealthQuorum.Config.HoldDown != 10*time.Second || f.HealthQuorum.Stale != 3 ||
		f.Etcd.QuotaBackendBytes != 2<<30 {
		t.Errorf("fleet: %+v", f)
	}
	if c, _ := config.Parse(nil, "steer.yaml", []byte("identity: x\n")); c.Fleet != nil {
		t.Error("no fleet section must mean no fleet")
	}
	_, err = config.Parse(nil, "steer.yaml", []byte(`fleet:
  node: "fra 1"
  etcd:
    endpoints: [etcd-a:2379, "http://etcd-b:2379"]
    tls: { ca: ca.pem, cert: node.pem }
    username: root
    quota_backend_bytes: 1000
  lease_ttl: 1500ms
  health_quorum: { healthy_above: 1.5, min_observers: 0, hold_down: -1s }
`))
	for _, want := range []string{
		`steer.yaml:2: fleet.node: "fra 1"`,
		`steer.yaml:4: fleet.etcd.endpoints[0]: "etcd-a:2379" is not an http:// or https:// URL`,
		`steer.yaml:4: fleet.etcd.endpoints[1]: "http://etcd-b:2379" is plain http but fleet.etcd.tls is set`,
		"steer.yaml:5: fleet.etcd.tls: cert and key go together",
		"steer.yaml:6: fleet.etcd.username: username and password_file go together",
		"steer.yaml:7: fleet.etcd.quota_backend_bytes: 1000 is not between 1 MiB",
		"steer.yaml:8: fleet.lease_ttl: 1.5s",
		"steer.yaml:9: fleet.health_quorum.healthy_above: 1.5",
		"steer.yaml:9: fleet.health_quorum.hold_down: -1s",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
