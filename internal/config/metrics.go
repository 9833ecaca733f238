package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
)

// Metrics says which series /metrics exposes beyond the default ones,
// which are per zone, policy and pool, so their number does not grow
// with the number of steered names.
type Metrics struct {
	// PerRecord lists steered names, or globs of them (path.Match syntax:
	// "*.shop.example.com"), that also get series of their own: answers
	// by pool, decisions by rule, pool health. Each costs about a dozen
	// series, so list the names worth it.
	PerRecord []string `yaml:"per_record"`
	// TargetLabels exposes each health-check target's state labelled with
	// its address (steer_health_target_up). Off by default: /metrics is
	// not authenticated, and the addresses are the origins.
	TargetLabels bool `yaml:"target_labels"`
}

// PerRecordMatch reports whether the steered name (any case, with or
// without the final dot) is listed in metrics.per_record.
func (m *Metrics) PerRecordMatch(name string) bool {
	if len(m.PerRecord) == 0 {
		return false
	}
	name = strings.ToLower(dns.Fqdn(name))
	for _, p := range m.PerRecord {
		if ok, _ := path.Match(strings.ToLower(dns.Fqdn(p)), name); ok {
			return true
		}
	}
	return false
}

// checkMetrics reports metrics.per_record entries that are empty, bad
// globs, or plain names of no steered record (a typo would otherwise
// quietly expose nothing).
func (c *Config) checkMetrics(probs *diag.Problems) {
	names := map[string]bool{}
	for _, r := range c.Records {
		names[strings.ToLower(dns.Fqdn(r.Name))] = true
	}
	for i, p := range c.Metrics.PerRecord {
		key := fmt.Sprintf("metrics.per_record[%d]", i)
		switch {
		case strings.TrimSpace(p) == "":
			probs.Add(c.File, c.Line(key), "%s: empty name", key)
		case strings.ContainsAny(p, "*?[\\"):
			if _, err := path.Match(p, ""); err != nil {
				probs.Add(c.File, c.Line(key), "%s: %q is not a valid glob: %v", key, p, err)
			}
		case !names[strings.ToLower(dns.Fqdn(p))]:
			probs.Add(c.File, c.Line(key), "%s: no steered record is named %q", key, p)
		}
	}
}
