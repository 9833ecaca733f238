package main

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"time"
)

// Misses is what steer's query log says about the record: the queries
// it answered (every one a resolver's cache miss), per site.
type Misses struct {
	// Count per site over the run's [0, Duration) and Total.
	Count [numSites]int64
	Total int64
	// PerBin[bin]: all sites' misses in each bin.
	PerBin []int64
	// Gap is the mean time between two misses of the big Unbound (its
	// cache entry's life, plus the wait for the next user query after it
	// expires); Gaps the number of gaps averaged.
	Gap  time.Duration
	Gaps int
	// Canary is the time of the last answer with the canary, per site,
	// relative to the run's start (-1: none).
	Canary [numSites]time.Duration
	// Unknown counts log lines from clients that are none of the sites.
	Unknown int64
}

type logLine struct {
	Time   time.Time `json:"time"`
	Client string    `json:"client"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Pool   string    `json:"pool"`
}

// siteOf says which site a query log client is.
func siteOf(client string) int {
	a, err := netip.ParseAddr(client)
	switch {
	case err != nil:
		return -1
	case a == bigOut:
		return siteBig
	case a == ecsOut:
		return siteECS
	case smallNet.Contains(a):
		return siteSmall
	}
	return -1
}

// readMisses reads steer's query log for the record's A queries from
// start over d.
func readMisses(path string, start time.Time, d, bin time.Duration) (*Misses, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &Misses{PerBin: make([]int64, int((d+bin-1)/bin))}
	for s := range numSites {
		m.Canary[s] = -1
	}
	var bigTimes []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Name != recordName || l.Type != "A" {
			continue
		}
		at := l.Time.Sub(start)
		if at < 0 || at >= d {
			continue
		}
		s := siteOf(l.Client)
		if s < 0 {
			m.Unknown++
			continue
		}
		m.Count[s]++
		m.Total++
		m.PerBin[int(at/bin)]++
		if s == siteBig {
			bigTimes = append(bigTimes, at)
		}
		if l.Pool == "canary" && at > m.Canary[s] {
			m.Canary[s] = at
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.Sort(bigTimes)
	if len(bigTimes) > 1 {
		m.Gaps = len(bigTimes) - 1
		m.Gap = (bigTimes[len(bigTimes)-1] - bigTimes[0]) / time.Duration(m.Gaps)
	}
	return m, nil
}
