// Package snapshot builds the immutable view of a configuration that the
// query path reads: the loaded zones and the server's answering options.
// A Snapshot never changes once built; a reload builds a new one and the
// server swaps it in atomically, so queries never wait for a load.
package snapshot

import (
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/policy"
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
	// Policies holds the compiled steered records.
	Policies *policy.Table
	// ECS: whether EDNS Client Subnet is honoured, and the longest source
	// prefixes used (longer ones are truncated).
	ECS         bool
	MaxSourceV4 int
	MaxSourceV6 int
	// GeoFiles are the geo database files on disk, watched for changes.
	GeoFiles []string
	// HealthChecks are the health check templates, by name.
	HealthChecks map[string]health.Check
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
			for _, a := range p.Addrs() {
				k := health.Key{Addr: a, Check: p.Check}
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	return keys
}

// healthChecks converts and checks the health_checks templates.
func healthChecks(cfg *config.Config, errs *diag.Problems) map[string]health.Check {
	out := map[string]health.Check{}
	for name, hc := range cfg.HealthChecks {
		c := health.Check{
			Name: name, Type: hc.Type, Port: hc.Port, Path: hc.Path, Host: hc.Host, Expect: hc.Expect,
			BodyContains: hc.BodyContains, InsecureSkipVerify: hc.InsecureSkipVerify, QName: hc.Name,
			Interval: time.Duration(hc.Interval), Timeout: time.Duration(hc.Timeout), Rise: hc.Rise, Fall: hc.Fall,
		}
		if hc.QType != "" {
			t, ok := dns.StringToType[strings.ToUpper(hc.QType)]
			if !ok {
				errs.Add(cfg.File, cfg.Line("health_checks."+name+".qtype"), "health check %s: unknown qtype %q", name, hc.QType)
				continue
			}
			c.QType = t
		}
		c = c.WithDefaults()
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

// Build loads every zone cfg names and assembles a Snapshot. Problems in any
// file are all reported (as diag.Problems); warnings never stop a load.
func Build(cfg *config.Config) (snap *Snapshot, warns diag.Problems, err error) {
	var errs diag.Problems
	var zones []*zone.Zone
	for _, zc := range cfg.Zones {
		file := cfg.Resolve(zc.File)
		z, zerrs, zwarns := zone.Load(cfg.FS, zc.Origin, file)
		warns = append(warns, zwarns...)
		for i, p := range zerrs {
			// A zone-wide problem (unreadable file, no SOA) is pointed at
			// the configuration entry that names the zone.
			if p.File == file && p.Line == 0 {
				zerrs[i] = diag.Problem{File: cfg.File, Line: zc.Line, Msg: fmt.Sprintf("zone %s (%s): %s", zc.Origin, file, p.Msg)}
			}
		}
		if len(zerrs) > 0 {
			errs = append(errs, zerrs...)
			continue
		}
		zones = append(zones, z)
	}
	set := zone.NewSet(zones)
	checks := healthChecks(cfg, &errs)
	var geoSet *geo.Set
	var geoFiles []string
	var table *policy.Table
	if len(cfg.Records) > 0 && len(errs) == 0 {
		geoSet = &geo.Set{}
		for i, name := range cfg.Geo.Databases {
			path := name
			if name != geo.EmbeddedName {
				path = cfg.Resolve(name)
			}
			d, err := geo.Open(path)
			if err != nil {
				errs.Add(cfg.File, cfg.Line(fmt.Sprintf("geo.databases[%d]", i)), "geo database %s: %v", name, err)
				continue
			}
			geoSet.DBs = append(geoSet.DBs, d)
			if name != geo.EmbeddedName {
				geoFiles = append(geoFiles, path)
			}
		}
		if len(errs) == 0 {
			var pwarns diag.Problems
			var err error
			table, pwarns, err = policy.Build(cfg, geoSet)
			warns = append(warns, pwarns...)
			if err != nil {
				errs = append(errs, err.(diag.Problems)...)
			}
		}
		if table != nil {
			for _, r := range table.Records {
				z := set.Find(r.Name)
				if z == nil {
					errs.Add(cfg.File, r.Line, "record %s is in no served zone (a steered name needs a zone for its SOA and NS)", r.Name)
					continue
				}
				rtype := r.Type
				if rtype != dns.TypeCNAME {
					rtype = dns.TypeA
				}
				if err := z.MarkSteered(r.Name, rtype); err != nil {
					errs.Add(cfg.File, r.Line, "record %s: %v", r.Name, err)
				}
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, warns, err
	}
	set.Precompile()
	s := &Snapshot{
		Geo:               geoSet,
		GeoFiles:          geoFiles,
		HealthChecks:      checks,
		Policies:          table,
		ECS:               *cfg.ECS.Enabled,
		MaxSourceV4:       cfg.ECS.MaxSourceV4,
		MaxSourceV6:       cfg.ECS.MaxSourceV6,
		Config:            cfg,
		Zones:             set,
		Identity:          cfg.Identity,
		Listen:            cfg.Listen,
		TCPMaxConnections: cfg.TCP.MaxConnections,
		TCPIdleTimeout:    time.Duration(cfg.TCP.IdleTimeout),
		Loaded:            time.Now(),
	}
	if cfg.VersionBind != config.VersionHidden {
		s.Version = cfg.VersionBind
	}
	return s, warns, nil
}

// Summary describes the snapshot in one line for logs.
func (s *Snapshot) Summary() string {
	records := 0
	for _, z := range s.Zones.Zones() {
		records += z.Records
	}
	out := fmt.Sprintf("%d zones, %d records", len(s.Zones.Zones()), records)
	if s.Policies != nil {
		out += fmt.Sprintf(", %d steered records compiled in %v against %s", len(s.Policies.Records), s.Policies.CompileTime.Round(time.Millisecond), s.Geo.Summary())
	}
	return out
}
