package snapshot

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/zone"
)

// A start reads and parses every zone file; one after another, 100,000
// small zones take seconds a second core would halve. preparse does the
// part of each zone's load that depends on its file alone (stamp, read,
// parse) on a bounded number of workers before build's loop, which then
// takes the results in configuration order: what is served, and every
// problem reported (file:line), is the same as a load one by one.
//
// Only zones with no previous copy are parsed ahead (a start, a zone
// added): their parse does not depend on anything build's loop decides.
// A reload parses the few zones that changed in the loop, on the one
// core it takes (policy.Workers), sharing what did not change with the
// zone served. A large file is left to the loop too, whose parse cuts it
// into parts on every worker: two of them parsed at once would hold two
// large zones' garbage at the same time.

// preparseMax is the largest file parsed ahead, as zone's parse cuts
// files of 1 MiB and more into parts parsed at once.
const preparseMax = 1 << 20

// preparsed is what preparse found of one zone's file.
type preparsed struct {
	st   zone.FileStamp
	stOK bool // st is the file's stamp before data was read
	data []byte
	rerr error
	// parsed: z, zerrs and zwarns are data's parse (zone.ParseWith).
	parsed        bool
	z             *zone.Zone
	zerrs, zwarns diag.Problems
}

// preparse loads, on workers goroutines, the file of every zone of cfg
// that is not a secondary and has no copy in prev, and returns the
// results by the zones' index in cfg.Zones (nil: left to the loop).
// Each parse gets the workers the loop's parse would have, and now() as
// its time. With fewer than two workers or two such zones it does
// nothing.
func preparse(cfg *config.Config, prev *Snapshot, workers int, now func() time.Time) []*preparsed {
	if workers < 2 {
		return nil // a reload: not even a look at every zone
	}
	var todo []int
	for i := range cfg.Zones {
		zc := &cfg.Zones[i]
		if zc.Secondary() || previousZone(prev, dns.CanonicalName(zc.Origin)) != nil {
			continue
		}
		todo = append(todo, i)
	}
	parseWorkers := workers
	workers = min(workers, len(todo))
	if workers < 2 {
		return nil
	}
	out := make([]*preparsed, len(cfg.Zones))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(todo) {
					return
				}
				i := todo[k]
				zc := &cfg.Zones[i]
				file := cfg.Resolve(zc.File)
				p := &preparsed{}
				p.st, p.stOK, p.data, p.rerr = zone.StampAndReadFile(cfg.FS, file, time.Now())
				if p.rerr == nil && len(p.data) < preparseMax {
					p.parsed = true
					p.z, p.zerrs, p.zwarns = zone.ParseWith(cfg.FS, zc.Origin, file, p.data, zone.ParseOptions{Workers: parseWorkers, Now: now()})
				}
				out[i] = p
			}
		})
	}
	wg.Wait()
	return out
}
