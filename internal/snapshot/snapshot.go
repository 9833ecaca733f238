// Package snapshot builds the view of a configuration that the query path
// reads: the loaded zones and the server's answering options. A reload
// builds a new Snapshot and the server swaps it in atomically, so queries
// never wait for a load. What was loaded is not changed after the build;
// the policy table's live state (health verdicts, latency, the pools last
// answered) does change in place, through the table's own atomics.
//
// metrics.go describes a snapshot's steered records to the steering
// counters (per zone, policy and pool; per record only for
// metrics.per_record) and exposes the pools' health (PoolCollector).
package snapshot

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/presign"
	"github.com/steer-dns/steer/internal/tsig"
	"github.com/steer-dns/steer/internal/zone"
)

// Snapshot is everything a query needs, frozen at load time.
type Snapshot struct {
	// Config is the configuration the snapshot was built from.
	Config *config.Config
	// Zones are the served zones.
	Zones *zone.Set
	// Identity answers id.server/hostname.bind and NSID; empty refuses them.
	Identity string
	// Version answers version.bind; empty refuses it.
	Version string
	// Listen is the list of host:port addresses to serve on.
	Listen []string
	// TCPMaxConnections and TCPIdleTimeout limit the TCP transport.
	TCPMaxConnections int
	TCPIdleTimeout    time.Duration
	// Loaded is when the snapshot was built.
	Loaded time.Time

	// Geo is the loaded geo databases (nil when no record is steered).
	Geo *geo.Set
	// Policies holds the compiled steered records; it never changes.
	Policies *policy.Table
	// Live is the live state of Policies (health, latency, when pools were
	// last answered), which changes while the snapshot is served; nil when
	// Policies is. A snapshot that keeps its predecessor's table keeps its
	// live state too.
	Live *policy.Live
	// ECS: whether EDNS Client Subnet is honoured, and the longest source
	// prefixes used (longer ones are truncated).
	ECS         bool
	MaxSourceV4 int
	MaxSourceV6 int
	// GeoFiles are the geo database files on disk, watched for changes.
	GeoFiles []string
	// ZonesReused counts the zones kept from the previous snapshot because
	// their files had the same bytes.
	ZonesReused int
	// ZonesParsed counts the zone files (and transferred copies) this
	// build parsed, and ZoneFilesRead the zone files it read: a reload
	// with one zone file changed reads and parses one.
	ZonesParsed, ZoneFilesRead int
	// PoliciesKept is set when Policies is the previous snapshot's table,
	// kept because neither the configuration nor the databases changed.
	PoliciesKept bool
	// HealthChecks are the health check templates, by name.
	HealthChecks map[string]health.Check
	// Degraded lists the zones not served as configured because their
	// file failed to load (BuildWith only; empty after Build). A snapshot
	// with degraded zones is still a good build: the node serves, but
	// should report itself degraded.
	Degraded []ZoneProblem

	// TSIG holds the keys of the tsig section, by the name it gives them,
	// and Keyring the same keys by their own names, each bound to its
	// algorithm: what signed queries and transfers are verified with,
	// built once per snapshot rather than per signed query. SetTSIG sets
	// both.
	TSIG    map[string]tsig.Key
	Keyring tsig.Keyring
	// Secondaries are the zones transferred in from primaries, by origin.
	Secondaries map[string]bool

	// Signing is the node's online signing budget and cache (kept across
	// reloads); Presigned the signed answer sets of the steered records
	// of signed zones (nil when there are none), see package presign.
	Signing   *Signing
	Presigned *presign.Table

	// Copies are the last good copies of the zones the build parsed,
	// left to be written by the caller (Options.DeferCopies); nil when
	// there are none or they were written.
	Copies *Copies

	// marks holds, for each zone of Zones, the steered records marked in
	// it (nil for a snapshot build did not make).
	marks map[*zone.Zone][]*policy.Record
}

// HealthKeys lists every (address, check) pair the steered records' pools
// ask to be checked.
func (s *Snapshot) HealthKeys() []health.Key {
	if s.Policies == nil {
		return nil
	}
	seen := map[health.Key]bool{}
	var keys []health.Key
	for _, r := range s.Policies.Records {
		for _, p := range r.Pools {
			if p.Check == "" {
				continue
			}
			for _, addrs := range [2][]netip.Addr{p.V4, p.V6} { // p.Addrs(), without a copy
				for _, a := range addrs {
					k := health.Key{Addr: a, Check: p.Check}
					if !seen[k] {
						seen[k] = true
						keys = append(keys, k)
					}
				}
			}
		}
	}
	return keys
}

// healthChecks fills in the defaults of the health_checks templates and
// checks them.
func healthChecks(cfg *config.Config, errs *diag.Problems) map[string]health.Check {
	out := map[string]health.Check{}
	for name, hc := range cfg.HealthChecks {
		c := hc.Check.WithDefaults() // decoded with the configuration
		if err := c.Validate(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				errs.Add(cfg.File, cfg.Line("health_checks."+name), "%s", line)
			}
			continue
		}
		out[name] = c
	}
	return out
}

// Summary describes the snapshot in one line for logs.
func (s *Snapshot) Summary() string {
	records, signed, pre := 0, 0, 0
	var found []string
	for _, z := range s.Zones.Zones() {
		records += z.Records
		switch {
		case z.Presigned():
			pre++
			found = append(found, z.Origin+" "+z.PresignedSummary())
		case z.Signer() != nil:
			signed++
		}
	}
	out := fmt.Sprintf("%d zones, %d records", len(s.Zones.Zones()), records)
	switch {
	case pre > 0:
		out = fmt.Sprintf("%d zones (%d signed, %d pre-signed), %d records", len(s.Zones.Zones()), signed, pre, records)
	case signed > 0:
		out = fmt.Sprintf("%d zones (%d signed), %d records", len(s.Zones.Zones()), signed, records)
	}
	if len(found) > 0 && len(found) <= 3 {
		// What the load found in each zone signed elsewhere.
		out += " [" + strings.Join(found, "; ") + "]"
	}
	if len(s.Degraded) > 0 {
		out += fmt.Sprintf(" (%d zones degraded)", len(s.Degraded))
	}
	if s.ZonesReused > 0 {
		out += fmt.Sprintf(" (%d zones unchanged, kept)", s.ZonesReused)
	}
	if s.Policies != nil {
		t := s.Policies
		if s.PoliciesKept {
			return out + fmt.Sprintf(", %d steered records (unchanged: the table being served is kept) against %s", len(t.Records), s.Geo.Summary())
		}
		out += fmt.Sprintf(", %d steered records compiled in %v against %s", len(t.Records), t.CompileTime.Round(time.Millisecond), s.Geo.Summary())
		if t.Shared > 0 || t.Reused > 0 {
			out += fmt.Sprintf(" (%d partitions compiled, %d reused from the previous load, %d records sharing one)", t.Compiled, t.Reused, t.Shared)
		}
	}
	return out
}

// SetTSIG sets the snapshot's TSIG keys (by the tsig section's names) and
// the keyring made of them.
func (s *Snapshot) SetTSIG(keys map[string]tsig.Key) {
	s.TSIG = keys
	s.Keyring = tsig.NewKeyring(slices.Collect(maps.Values(keys))...)
}
