package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
)

func TestKeyTimings(t *testing.T) {
	c := mustParse(t, `zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [Kksk, Kzsk]
      zsk_lifetime: 30d
      dnskey_ttl: 1h
      propagation_delay: 90s
      max_zone_ttl: 1d
  - origin: example.org
    file: example.org.zone
    dnssec: { keys: [K], dnskey_ttl: 300s }
`)
	d := c.Zones[0].DNSSEC
	if d.ZSKLifetime != 30*24*time.Hour || d.DNSKEYTTL != time.Hour || d.PropagationDelay != 90*time.Second || d.MaxZoneTTL != 24*time.Hour {
		t.Fatalf("timings %+v", d)
	}
	if o := c.Zones[1].DNSSEC.Options(); o.KeyTTL != 300*time.Second {
		t.Errorf("dnskey_ttl into the signer's options: %+v", o)
	}
	_, ps := parse(t, `zones:
  - origin: a.example
    file: a.zone
    dnssec:
      keys: [K]
      zsk_lifetime: 30d
      dnskey_ttl: 1.5s
  - origin: b.example
    file: b.zone
    dnssec:
      keys: [K]
      propagation_delay: 1m
  - origin: c.example
    file: c.zone
    dnssec:
      keys: [K]
      zsk_lifetime: 1d
      dnskey_ttl: 1h
      max_zone_ttl: 1d
  - origin: d.example
    file: d.zone
    dnssec: { keys: [K], zsk_lifetime: -1h }
`)
	checkProblems(t, ps, []prob{
		{7, "a.example: dnssec.dnskey_ttl: must be a whole number of seconds"},
		{12, "b.example: dnssec.propagation_delay is a ZSK rollover timing: set zsk_lifetime too"},
		{17, "c.example: dnssec.zsk_lifetime: zsk_lifetime 24h0m0s is not longer than the rollover it needs"},
		{22, "d.example: dnssec.zsk_lifetime: must be more than 0"},
	})
	_, ps = parse(t, `zones:
  - origin: a.example
    file: a.zone
    dnssec: { keys: [K], zsk_lifetime: 3w }
  - origin: d.example
    file: d.zone
    dnssec: { keys: [K], zsk_lifetime: 30d, max_zone_ttl: [1] }
`)
	checkProblems(t, ps, []prob{
		{4, `a.example: dnssec.zsk_lifetime: invalid duration "3w"`},
		{7, "d.example: dnssec.max_zone_ttl: must be a duration"},
	})
}

// zsk_lifetime with a CSK alone is refused at its line when the keys are
// read.
func TestZSKLifetimeNeedsZSK(t *testing.T) {
	dir := t.TempDir()
	csk := filepath.Base(writeKey(t, dir, "example.com", dns.ECDSAP256SHA256, true))
	c, err := config.Parse(nil, filepath.Join(dir, "steer.yaml"), []byte(`zones:
  - origin: example.com
    file: example.com.zone
    dnssec:
      keys: [`+csk+`]
      zsk_lifetime: 30d
`))
	if err != nil {
		t.Fatal(err)
	}
	_, ps := c.ZoneKeys(0)
	if len(ps) != 1 || ps[0].Line != 6 || !strings.Contains(ps[0].Msg, "example.com: dnssec.zsk_lifetime needs a KSK and a ZSK; the zone's keys are a CSK only") {
		t.Fatalf("problems: %v", ps)
	}
}
