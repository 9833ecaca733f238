package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
)

func TestTransferKeys(t *testing.T) {
	c := mustParse(t, `tsig:
  xfr-key: { secret_file: /etc/steer/xfr.key }
  nsd-key: { algorithm: hmac-sha512, secret_file: nsd.key }
zones:
  - origin: example.com
    primaries: [192.0.2.1, "[2001:db8::1]:5300"]
    tsig: xfr-key
  - origin: example.org
    file: example.org.zone
    ixfr_journal: 5
    secondaries:
      - { address: 198.51.100.7, tsig: nsd-key }
      - { address: 198.51.100.0/24, tsig: xfr-key }
      - { address: 198.51.100.8, tsig: xfr-key, notify: ":5300" }
      - { address: 198.51.100.9, tsig: xfr-key, notify: none }
`)
	if k := c.TSIG["xfr-key"]; k.Algorithm != "hmac-sha256" || k.SecretFile != "/etc/steer/xfr.key" {
		t.Errorf("xfr-key %+v", k)
	}
	z := c.Zones[0]
	if !z.Secondary() || z.TSIG != "xfr-key" || z.Journal() != config.DefaultIXFRJournal {
		t.Errorf("zone 0 %+v", z)
	}
	for i, want := range []string{"192.0.2.1:53", "[2001:db8::1]:5300"} {
		if got, err := config.PrimaryAddr(z.Primaries[i]); err != nil || got != want {
			t.Errorf("primary %d: %q %v, want %q", i, got, err, want)
		}
	}
	o := c.Zones[1]
	if o.Secondary() || o.Journal() != 5 || len(o.Secondaries) != 4 {
		t.Fatalf("zone 1 %+v", o)
	}
	for i, want := range []struct{ prefix, notify string }{
		{"198.51.100.7/32", "198.51.100.7:53"},
		{"198.51.100.0/24", ""},
		{"198.51.100.8/32", "198.51.100.8:5300"},
		{"198.51.100.9/32", ""},
	} {
		s := o.Secondaries[i]
		if s.Prefix().String() != want.prefix || s.NotifyAddr() != want.notify {
			t.Errorf("secondary %d: prefix %s notify %q, want %s %q", i, s.Prefix(), s.NotifyAddr(), want.prefix, want.notify)
		}
	}
}

func TestTransferProblems(t *testing.T) {
	_, ps := parse(t, `tsig:
  xfr-key: { algorithm: hmac-sha256 }
zones:
  - origin: a.example
    file: a.zone
    primaries: [192.0.2.1]
  - origin: b.example
    primaries: [192.0.2.1, "192.0.2.1:53", nowhere]
    tsig: no-such-key
    ixfr_journal: -1
  - origin: c.example
    file: c.zone
    tsig: xfr-key
    secondaries:
      - { address: 198.51.100.300, tsig: xfr-key }
      - { address: 198.51.100.7 }
      - { address: 198.51.100.0/24, tsig: xfr-key, notify: ":53" }
      - { address: 198.51.100.8, tsig: xfr-key, notify: "somewhere:53" }
  - origin: d.example
`)
	checkProblems(t, ps, []prob{
		{2, "tsig: xfr-key has no secret_file"},
		{6, "has both a file and primaries"},
		{8, "primary 192.0.2.1:53 is listed twice"},
		{8, `primary "nowhere" is not an IP address`},
		{9, `no key "no-such-key" in the tsig section (it has xfr-key)`},
		{10, "ixfr_journal: -1 is not between 0 and 10000"},
		{13, "tsig names the key of transfers from primaries"},
		{15, `secondary address "198.51.100.300" is not an IP address or prefix`},
		{16, "secondary 198.51.100.7 has no tsig key"},
		{17, "a port alone needs address to be one address"},
		{18, `"somewhere:53" is not IP:port`},
		{19, "d.example. has no file (or primaries"},
	})
	if t.Failed() {
		for _, p := range ps {
			t.Log(strings.TrimSpace(p.String()))
		}
	}
}

func TestGroupKeys(t *testing.T) {
	c := mustParse(t, `records:
  - name: a.example.com
    policy: p
    pools:
      x: { address: 192.0.2.1 }
    groups:
      zeta:  { failover: [x] }
      alpha: { split: [{ pool: x, weight: 1 }], sticky: client_subnet, site: s, location: { lat: 1, lon: 2 } }
policies:
  p:
    groups:
      mid: { by: geoproximity, fallback: [zeta, alpha] }
    rules:
      - default: { pool: mid }
`)
	names, paths := c.GroupNames(0)
	if strings.Join(names, " ") != "zeta alpha mid" || paths[2] != "policies.p.groups.mid" || paths[0] != "records[0].groups.zeta" {
		t.Errorf("names %v paths %v", names, paths)
	}
	if g := c.Records[0].Groups["alpha"]; g.Sticky != "client_subnet" || g.Site != "s" || g.Location.Lon != 2 {
		t.Errorf("alpha %+v", g)
	}
	if l := c.Line("policies.p.groups.mid"); l != 12 {
		t.Errorf("line of policies.p.groups.mid: %d", l)
	}
	_, ps := parse(t, `records:
  - name: a.example.com
    pools:
      x: { address: 192.0.2.1 }
    groups:
      g: { failovr: [x] }
`)
	checkProblems(t, ps, []prob{{6, "failovr"}})
}

func TestTransfersSection(t *testing.T) {
	c := mustParse(t, `transfers:
  transfers_in: 3
  idle_timeout_in: 45s
  transfer_source: 192.0.2.10
  notify_source: "2001:db8::10"
`)
	tr := c.Transfers
	ts, ns := tr.SourceAddrs()
	if tr.TransfersIn != 3 || tr.IdleTimeoutIn != config.Duration(45*time.Second) ||
		tr.MaxTransferTimeIn != config.DefaultMaxTransferTimeIn || ts.String() != "192.0.2.10" || ns.String() != "2001:db8::10" {
		t.Errorf("transfers %+v", tr)
	}
	d := mustParse(t, "listen: [\"127.0.0.1:53\"]\n").Transfers
	if ts, ns := d.SourceAddrs(); d.TransfersIn != 10 || d.IdleTimeoutIn != config.Duration(30*time.Second) ||
		d.MaxTransferTimeIn != config.Duration(120*time.Minute) || ts.IsValid() || ns.IsValid() {
		t.Errorf("defaults %+v", d)
	}

	_, ps := parse(t, `transfers:
  transfers_in: -1
  idle_timeout_in: 3h
  max_transfer_time_in: 2h
  transfer_source: 192.0.2.10:53
  notify_source: 0.0.0.0
`)
	checkProblems(t, ps, []prob{
		{2, "transfers.transfers_in: -1 is not between 1 and 1000"},
		{3, "transfers.idle_timeout_in: 3h0m0s is longer than max_transfer_time_in (2h0m0s)"},
		{5, `transfers.transfer_source: "192.0.2.10:53" is not an IP address`},
		{6, "transfers.notify_source: 0.0.0.0 cannot be a source address"},
	})
}
