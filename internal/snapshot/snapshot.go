// Package snapshot builds the immutable view of a configuration that the
// query path reads: the loaded zones and the server's answering options.
// A Snapshot never changes once built; a reload builds a new one and the
// server swaps it in atomically, so queries never wait for a load.
package snapshot

import (
	"fmt"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
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
	if err := errs.Err(); err != nil {
		return nil, warns, err
	}
	s := &Snapshot{
		Config:            cfg,
		Zones:             zone.NewSet(zones),
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
	return fmt.Sprintf("%d zones, %d records", len(s.Zones.Zones()), records)
}
