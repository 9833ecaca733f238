package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/steer-dns/steer/internal/config"
)

// TestNodeFileSections: a fleet node's own file holds the fleet section
// and what is the node's own (listen, api, anycast, node, identity);
// any other section is an error at its line, saying it belongs in the
// pushed configuration.
func TestNodeFileSections(t *testing.T) {
	const head = "fleet:\n  node: fra-1\n  etcd: { endpoints: [\"http://127.0.0.1:2379\"] }\n"
	ok := head + `listen: ["127.0.0.1:5300"]
api: { listen: "127.0.0.1:8053" }
node: { region: eu, country: DE }
identity: pop-fra
`
	c, err := config.Parse(nil, "node.yaml", []byte(ok))
	if err != nil {
		t.Fatalf("a node file with only the node's own keys: %v", err)
	}
	if c.Identity != "pop-fra" {
		t.Errorf("identity %q", c.Identity)
	}
	_, err = config.Parse(nil, "node.yaml", []byte(head+`records:
  - name: www.example.com
    pools: { a: { address: 192.0.2.1 } }
    rules: [ { default: { pool: a } } ]
zones:
  - { origin: example.com, file: example.com.zone }
`))
	for _, want := range []string{
		"node.yaml:4: records: this is a fleet node's file (it has a fleet section): records belongs in the configuration pushed with steer fleet push",
		"node.yaml:8: zones: this is a fleet node's file",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	// Of transfers, the node's file holds only the addresses it sends from.
	if _, err := config.Parse(nil, "node.yaml", []byte(head+"transfers: { transfer_source: 127.0.0.2, notify_source: 127.0.0.2 }\n")); err != nil {
		t.Errorf("a node file with its own transfer and notify sources: %v", err)
	}
	_, err = config.Parse(nil, "node.yaml", []byte(head+"transfers:\n  transfer_source: 127.0.0.2\n  transfers_in: 4\n"))
	if want := "node.yaml:6: transfers.transfers_in: this is a fleet node's file (it has a fleet section): transfers.transfers_in is the fleet's"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("transfers_in in a node's file: want %q in\n%v", want, err)
	}
	// anycast may be the node's own, but its self-check cannot default to
	// a zone of the node's file, which has none.
	_, err = config.Parse(nil, "node.yaml", []byte(head+"anycast: { router_id: 198.51.100.1, local_as: 64512, prefixes: [192.0.2.0/24], peers: [ { address: 127.0.53.1, remote_as: 64510 } ] }\n"))
	if want := "node.yaml:4: anycast.self_check.name: missing: the name the node queries itself for (a fleet node's file has no zones to default to"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("anycast without self_check.name in a node's file: want %q in\n%v", want, err)
	}
	// Without a fleet section, every section is the file's own.
	if _, err := config.Parse(nil, "steer.yaml", []byte("identity: x\nrrl: { enabled: false }\n")); err != nil {
		t.Errorf("a plain configuration: %v", err)
	}
}

// TestFleetIdentity: in a fleet the identity answered to id.server and
// NSID defaults to the node's name (so the nodes of an anycast set can be
// told apart); "hide" refuses them; outside a fleet it stays unset.
func TestFleetIdentity(t *testing.T) {
	for _, c := range []struct{ file, identity, served string }{
		{"fleet: { node: fra-1, etcd: { endpoints: [\"http://e:2379\"] } }\n", "fra-1", "fra-1"},
		{"fleet: { node: fra-1, etcd: { endpoints: [\"http://e:2379\"] } }\nnode: { name: pop-7 }\n", "pop-7", "pop-7"},
		{"fleet: { node: fra-1, etcd: { endpoints: [\"http://e:2379\"] } }\nidentity: hide\n", "hide", ""},
		{"node: { name: pop-7 }\n", "", ""},
		{"identity: ns1\n", "ns1", "ns1"},
	} {
		cfg, err := config.Parse(nil, "steer.yaml", []byte(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Identity != c.identity || cfg.ServerIdentity() != c.served {
			t.Errorf("%s: identity %q served %q, want %q %q", c.file, cfg.Identity, cfg.ServerIdentity(), c.identity, c.served)
		}
	}
}

// TestPushProblems: a configuration to push names its node-local files by
// absolute paths, and keeps the files that travel with it in its
// directory; each problem names the key's line.
func TestPushProblems(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "steer.yaml")
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("t\n"), 0o600)
	body := `geo: { databases: [embedded, GeoLite2-City.mmdb, /var/lib/geo/asn.mmdb] }
latency: { files: [/srv/lat.csv, lat2.csv] }
health: { feed_file: feed.json }
query_log: { path: stdout }
api: { listen: "127.0.0.1:8053", token_file: ` + tok + ` }
cookies: { secret_file: ../cookie.key }
tsig:
  xfr: { secret_file: /etc/elsewhere/xfr.key }
zones:
  - origin: example.com
    file: zones/example.com.zone
  - origin: example.net
    file: ../other/example.net.zone
  - origin: example.org
    file: ` + filepath.Join(dir, "zones", "example.org.zone") + "\n"
	c, err := config.Parse(nil, cfgPath, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	probs, warns := c.PushProblems()
	got := probs.Error()
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	for _, want := range []string{
		cfgPath + `:1: geo.databases[1]: "GeoLite2-City.mmdb" is relative: in a pushed configuration a node-local file is named by its absolute path on each node`,
		cfgPath + `:2: latency.files[1]: "lat2.csv" is relative`,
		cfgPath + `:3: health.feed_file: "feed.json" is relative`,
		cfgPath + `:6: cookies.secret_file: "../cookie.key" is outside the configuration's directory`,
		cfgPath + `:8: tsig.xfr.secret_file: "/etc/elsewhere/xfr.key" is outside the configuration's directory`,
		cfgPath + `:13: zones[1].file: "../other/example.net.zone" is outside the configuration's directory`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, notWant := range []string{"databases[0]", "databases[2]", "latency.files[0]", "query_log", "token_file", "zones[0]", "zones[2]"} {
		if strings.Contains(got, notWant) {
			t.Errorf("%s is fine, yet reported:\n%s", notWant, got)
		}
	}
}

// TestLocalPath: an absolute node-local path is the node's own file even
// for a configuration read from an FS (a fleet bundle); a relative one is
// the configuration's (in its FS).
func TestLocalPath(t *testing.T) {
	fsys := fstest.MapFS{"steer.yaml": {Data: []byte("api: { listen: \"127.0.0.1:8053\", token_file: tok }\n")}, "tok": {Data: []byte("in-fs")}}
	c, err := config.LoadFS(fsys, "steer.yaml")
	if err != nil || c.API.Token.Value() != "in-fs" {
		t.Fatalf("relative token in the FS: %v %q", err, c.API.Token.Value())
	}
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("on-disk\n"), 0o600)
	fsys["steer.yaml"] = &fstest.MapFile{Data: []byte("api: { listen: \"127.0.0.1:8053\", token_file: " + tok + " }\n")}
	c, err = config.LoadFS(fsys, "steer.yaml")
	if err != nil || c.API.Token.Value() != "on-disk" {
		t.Fatalf("absolute token of an FS configuration: %v %q", err, c.API.Token.Value())
	}
	if c.LocalPath(tok) != tok || c.LocalFS(tok) != nil || c.LocalPath("x/y") != "x/y" || c.LocalFS("x/y") == nil {
		t.Errorf("LocalPath/LocalFS: %q %v %q", c.LocalPath(tok), c.LocalFS(tok), c.LocalPath("x/y"))
	}
	// Files that travel with the configuration are the FS's, absolute or not.
	if c.Resolve("/etc/steer/zones/a.zone") != "etc/steer/zones/a.zone" {
		t.Errorf("Resolve: %q", c.Resolve("/etc/steer/zones/a.zone"))
	}
}
