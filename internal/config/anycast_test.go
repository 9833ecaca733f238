package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const anycastBase = `zones:
  - origin: example.com
    file: zones/example.com.zone
anycast:
  router_id: 198.51.100.1
  local_as: 64512
  prefixes: [192.0.2.0/24, 2001:db8:53::/48]
  next_hop_v6: 2001:db8:53::1
  peers:
    - { address: 127.0.53.1, port: 1790, remote_as: 64510, local_address: 127.0.53.2 }
`

func TestAnycastDefaults(t *testing.T) {
	c, err := Parse(nil, "a.yaml", []byte(anycastBase))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Anycast
	if a.NextHopV4 != "self" || a.Mode != "active" || a.DrainPeriod() != DefaultDrain || a.Threshold() != 0.8 {
		t.Errorf("defaults: %+v", a)
	}
	p := a.Peers[0]
	if time.Duration(p.ConnectRetry) != time.Second || time.Duration(p.HoldTime) != 90*time.Second || p.Port != 1790 {
		t.Errorf("peer defaults: %+v", p)
	}
	sc := a.SelfCheck
	if sc.Name != "example.com" || sc.Type != "SOA" || sc.Rise != 2 || sc.Fall != 2 ||
		time.Duration(sc.Interval) != time.Second || time.Duration(sc.Timeout) != 500*time.Millisecond {
		t.Errorf("self-check defaults: %+v", sc)
	}
	if got := a.ParsedPrefixes(); len(got) != 2 || got[1].String() != "2001:db8:53::/48" {
		t.Errorf("prefixes %v", got)
	}
	c, err = Parse(nil, "a.yaml", []byte(anycastBase+"  drain: 0s\n  withdraw_below: 0\n  overload: { qps_above: 100 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Anycast.DrainPeriod() != 0 || c.Anycast.Threshold() != 0 || c.Anycast.Overload.Prepend != DefaultPrepend {
		t.Errorf("explicit zeros: %+v", c.Anycast)
	}
	if c, err := Parse(nil, "a.yaml", []byte("zones: []\n")); err != nil || c.Anycast != nil {
		t.Errorf("no anycast section: %v %v", c, err)
	}
}

func TestAnycastErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"long v4", strings.Replace(anycastBase, "192.0.2.0/24", "192.0.2.0/25", 1),
			"a.yaml:7: anycast.prefixes[0]: 192.0.2.0/25 is longer than /24: transit providers filter"},
		{"long v6", strings.Replace(anycastBase, "2001:db8:53::/48", "2001:db8:53::/64", 1),
			"a.yaml:7: anycast.prefixes[1]: 2001:db8:53::/64 is longer than /48"},
		{"host bits", strings.Replace(anycastBase, "192.0.2.0/24", "192.0.2.1/24", 1), "did you mean 192.0.2.0/24"},
		{"not a prefix", strings.Replace(anycastBase, "192.0.2.0/24", "banana", 1), `"banana" is not a prefix`},
		{"mapped next hop", strings.Replace(anycastBase, "2001:db8:53::1", "\"::ffff:192.0.2.1\"", 1),
			"a.yaml:8: anycast.next_hop_v6: ::ffff:192.0.2.1 is IPv4-mapped"},
		{"v6 self over v4", strings.Replace(anycastBase, "2001:db8:53::1", "self", 1), "self over an IPv4 session"},
		{"v6 missing", strings.Replace(anycastBase, "  next_hop_v6: 2001:db8:53::1\n", "", 1), "anycast.next_hop_v6: missing"},
		{"v4 next hop", strings.Replace(anycastBase, "  next_hop_v6:", "  next_hop_v4: 2001:db8::1\n  next_hop_v6:", 1), "neither self nor an IPv4"},
		{"router id", strings.Replace(anycastBase, "198.51.100.1", "2001:db8::1", 1), "a.yaml:5: anycast.router_id: \"2001:db8::1\" is not an IPv4"},
		{"no router id", strings.Replace(anycastBase, "  router_id: 198.51.100.1\n", "", 1), "a.yaml:4: anycast.router_id: missing"},
		{"as", strings.Replace(anycastBase, "64512", "23456", 1), "anycast.local_as: 23456 is not an AS number"},
		{"no peers", strings.Split(anycastBase, "  peers:")[0], "anycast.peers: list at least one"},
		{"peer address", strings.Replace(anycastBase, "address: 127.0.53.1", "address: nowhere", 1), `address "nowhere" is not an IP`},
		{"peer as", strings.Replace(anycastBase, "remote_as: 64510", "remote_as: 0", 1), "a.yaml:10: anycast.peers[0]: remote_as is missing"},
		{"hold", strings.Replace(anycastBase, "}\n", ", hold_time: 2s }\n", 1), "hold_time 2s must be whole seconds, at least 3s"},
		{"retry", strings.Replace(anycastBase, "}\n", ", connect_retry: 500ms }\n", 1), "connect_retry 500ms"},
		{"password", strings.Replace(anycastBase, "}\n", ", password_file: nosuch }\n", 1), "password_file"},
		{"unknown key", strings.Replace(anycastBase, "}\n", ", pasword: x }\n", 1), `unknown key "pasword" in anycast.peers[0]`},
		{"mode", anycastBase + "  mode: hot\n", `a.yaml:11: anycast.mode: "hot" is neither active nor standby`},
		{"threshold", anycastBase + "  withdraw_below: 1.5\n", "withdraw_below: 1.5 is not between 0 and 1"},
		{"prepend", anycastBase + "  overload: { qps_above: 10, prepend: 20 }\n", "overload.prepend: 20"},
		{"prepend alone", anycastBase + "  overload: { prepend: 2 }\n", "overload.qps_above: missing"},
		{"self-check type", anycastBase + "  self_check: { type: BOGUS }\n", `self_check.type: unknown query type "BOGUS"`},
		{"self-check timeout", anycastBase + "  self_check: { interval: 1s, timeout: 2s }\n", "self_check.timeout: 2s must be positive and at most the interval"},
		{"drain", anycastBase + "  drain: -1s\n", "anycast.drain: must not be negative"},
	} {
		_, err := Parse(nil, "a.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestAnycastPasswordFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(strings.Replace(anycastBase, "}\n", ", password_file: pw }\n", 1)), 0o644)
	if _, err := Load(filepath.Join(dir, "a.yaml")); err != nil {
		t.Errorf("a password file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(strings.Replace(anycastBase, "}\n", ", password_file: empty }\n", 1)), 0o644)
	if _, err := Load(filepath.Join(dir, "a.yaml")); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty password file: %v", err)
	}
}
