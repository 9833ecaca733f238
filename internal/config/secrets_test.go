package config

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// countFS counts the opens of each file of an fstest.MapFS.
type countFS struct {
	fsys  fstest.MapFS
	mu    sync.Mutex
	opens map[string]int
}

func (c *countFS) Open(name string) (fs.File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return c.fsys.Open(name)
}

func (c *countFS) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.opens
	c.opens = map[string]int{}
	return o
}

// secretsConfig is a fleet node's file, which names every kind of secret
// file (and so may hold no zones).
const secretsConfig = `api: { listen: "127.0.0.1:8053", token_file: api.token }
anycast:
  router_id: 198.51.100.1
  local_as: 64512
  prefixes: [192.0.2.0/24]
  self_check: { name: example.com }
  peers:
    - { address: 127.0.53.1, remote_as: 64510, password_file: bgp.pw }
    - { address: 127.0.53.3, remote_as: 64511, password_file: bgp2.pw }
fleet:
  node: n1
  etcd: { endpoints: ["http://127.0.0.1:2379"], username: steer, password_file: etcd.pw }
`

// TestSecretsReadOncePerLoad: every secret file is opened exactly once
// by a load (and once by a reload of the same bytes), its content is in
// the loaded Config for the consumers, and printing the Config never
// shows it.
func TestSecretsReadOncePerLoad(t *testing.T) {
	cfs := &countFS{opens: map[string]int{}, fsys: fstest.MapFS{
		"steer.yaml": {Data: []byte(secretsConfig)},
		"api.token":  {Data: []byte("  tok-123\n")},
		"bgp.pw":     {Data: []byte("md5-pw\n")},
		"bgp2.pw":    {Data: []byte("md5-pw-2")},
		"etcd.pw":    {Data: []byte("etcd-pw\n")},
	}}
	secretFiles := []string{"api.token", "bgp.pw", "bgp2.pw", "etcd.pw"}
	onceEach := func(what string) {
		t.Helper()
		opens := cfs.take()
		for _, f := range secretFiles {
			if opens[f] != 1 {
				t.Errorf("%s: %s opened %d times, want once (all opens: %v)", what, f, opens[f], opens)
			}
		}
	}
	c, err := LoadFS(cfs, "steer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	onceEach("load")
	got := []string{c.API.Token.Value(), c.Anycast.Peers[0].Password.Value(), c.Anycast.Peers[1].Password.Value(), c.Fleet.Etcd.Password.Value()}
	if want := []string{"tok-123", "md5-pw", "md5-pw-2", "etcd-pw"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("secrets %q, want %q", got, want)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("cfg", "token", c.API.Token, "peer", c.Anycast.Peers[0].Password)
	printed := fmt.Sprintf("%v %+v %#v %s", c.API, c.Anycast.Peers, c.Fleet.Etcd, c.API.Token) + logged.String()
	for _, s := range got {
		if strings.Contains(printed, s) {
			t.Errorf("printing the configuration shows the secret %q: %s", s, printed)
		}
	}

	// A reload of the same bytes reads the secrets again, once each, and
	// keeps the parse while they are unchanged.
	c2, same, err := LoadAgain(cfs, "steer.yaml", c)
	if err != nil || !same || c2 != c {
		t.Fatalf("LoadAgain of the same bytes and secrets: same %v, %v", same, err)
	}
	onceEach("reload")
	// A rotated token is picked up without touching steer.yaml, and prev
	// is left as it was.
	cfs.fsys["api.token"] = &fstest.MapFile{Data: []byte("tok-456")}
	c3, same, err := LoadAgain(cfs, "steer.yaml", c)
	if err != nil || same || c3.API.Token.Value() != "tok-456" || c.API.Token.Value() != "tok-123" {
		t.Fatalf("rotated token: same %v, %v, new %q, prev %q", same, err, c3.API.Token.Value(), c.API.Token.Value())
	}
	onceEach("reload after rotation")
	// A secret file gone rejects the load, naming the key.
	delete(cfs.fsys, "etcd.pw")
	if _, _, err := LoadAgain(cfs, "steer.yaml", c); err == nil || !strings.Contains(err.Error(), "fleet.etcd.password_file") {
		t.Fatalf("missing etcd.pw: %v", err)
	}
}

func TestTokenEnv(t *testing.T) {
	cfg := "api: { listen: \"127.0.0.1:8053\", token_env: STEER_TEST_TOKEN }\n"
	t.Setenv("STEER_TEST_TOKEN", " env-tok \n")
	c, err := Parse(nil, "steer.yaml", []byte(cfg))
	if err != nil || c.API.Token.Value() != "env-tok" {
		t.Fatalf("token_env: %v, %q", err, c.API.Token.Value())
	}
	t.Setenv("STEER_TEST_TOKEN", "")
	if _, err := Parse(nil, "steer.yaml", []byte(cfg)); err == nil || !strings.Contains(err.Error(), "steer.yaml:1: api.token_env: $STEER_TEST_TOKEN is unset or empty") {
		t.Fatalf("empty token_env: %v", err)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("  abc123\n"), 0o600)
	if tok, err := ReadSecret(nil, p); err != nil || tok.Value() != "abc123" {
		t.Fatalf("ReadSecret = %q, %v", tok.Value(), err)
	}
	os.WriteFile(p, []byte(" \n\t"), 0o600)
	if _, err := ReadSecret(nil, p); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token: %v", err)
	}
	if _, err := ReadSecret(nil, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file: want an error")
	}
}

// TestHealthCheckDecoded: a health_checks template decodes into the
// health.Check the snapshot uses, its qtype and durations included; a bad
// qtype is reported at its line.
func TestHealthCheckDecoded(t *testing.T) {
	c, err := Parse(nil, "steer.yaml", []byte("health_checks:\n  d: { type: dns, name: example.com, qtype: aaaa, port: 5353, interval: 3s, timeout: 1s, rise: 4 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HealthChecks["d"].Check
	if hc.Name != "d" || hc.Type != "dns" || hc.QName != "example.com" || hc.QType != 28 || hc.Port != 5353 ||
		hc.Interval != 3*time.Second || hc.Timeout != time.Second || hc.Rise != 4 {
		t.Errorf("decoded %+v", hc)
	}
	_, err = Parse(nil, "steer.yaml", []byte("health_checks:\n  d:\n    type: dns\n    qtype: BOGUS\n"))
	if err == nil || !strings.Contains(err.Error(), `steer.yaml:4: health check d: unknown qtype "BOGUS"`) {
		t.Errorf("bad qtype: %v", err)
	}
}
