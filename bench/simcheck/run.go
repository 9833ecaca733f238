package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Options is one validation: the population, how long, and the
// prediction's size.
type Options struct {
	// Dir is the working directory (configs, logs, the query log, the
	// scenario and the prediction's files).
	Dir string
	// Duration of the run and width of a bin; TTL of the record (s).
	Duration, Bin time.Duration
	TTL           int
	// Rate is the users' queries per second; BigShare and ECSShare the
	// parts that go to the big and the ECS Unbound, the rest to Small
	// emulated resolvers; ECSSubnets the ECS users' /24s (NAShare of them
	// in the Americas).
	Rate               float64
	BigShare, ECSShare float64
	Small              int
	ECSSubnets         int
	NAShare            float64
	// DrainAt drains the canary (0: no drain).
	DrainAt time.Duration
	// Seed draws the subnets and the arrivals (the prediction's runs are
	// seeded Seed, Seed+1, …); Runs is the number of Monte-Carlo runs.
	Seed uint64
	Runs int
	// Ports, when set, are four free ports (steer's DNS and API, the big
	// and the ECS Unbound); otherwise free ones are taken below the
	// ephemeral range.
	Ports []int `json:"-"`
	// Log receives progress lines (nil: none).
	Log io.Writer `json:"-"`
}

// Defaults are the figures: 2,000 user q/s, TTL 10 s, 30 minutes
// in 10-second bins, 300 ECS /24s, 50 small resolvers; the canary drained
// 2 minutes before the end.
func Defaults() Options {
	return Options{Duration: 30 * time.Minute, Bin: 10 * time.Second, TTL: 10, Rate: 2000,
		BigShare: 0.2, ECSShare: 0.2, Small: 50, ECSSubnets: 300, NAShare: 0.75,
		DrainAt: 28 * time.Minute, Seed: 1, Runs: 200}
}

// Real is what the real resolvers did.
type Real struct {
	Obs     *Observed
	Misses  *Misses
	Config  string // steer's configuration file
	Subnets []netip.Prefix
	// Steer's own counters at the end of the run, to tell a gap in
	// the query log from a gap in the traffic: the DNS queries it
	// answered (steer_dns_queries_total, priming included) and the
	// log's entries written and dropped (steer_query_log_entries_total).
	Queries, LogWritten, LogDropped float64
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// freePorts returns n ports free now for UDP and TCP on 127.0.0.1, taken
// below the ephemeral range so that no outgoing connection takes one
// between now and the servers' binding it (as dnstest.FreePorts does).
func freePorts(n int) ([]int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				lo = v
			}
		}
	}
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free ports")
		}
		p := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			l.Close()
			continue
		}
		held = append(held, l, u)
		ports = append(ports, p)
	}
	return ports, nil
}

// ecsSubnetsFor draws the ECS users' /24s from the geo database the
// configuration at path names.
func ecsSubnetsFor(path string, o Options) ([]netip.Prefix, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		return nil, err
	}
	return ecsSubnets(snap.Geo, o.ECSSubnets, o.NAShare, o.Seed)
}

// runReal starts steer (in this process), the two Unbounds and the
// generator, plays the population for o.Duration, drains the canary at
// o.DrainAt, and reads steer's query log.
func runReal(o Options) (_ *Real, err error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	ports := o.Ports
	if len(ports) != 4 {
		if ports, err = freePorts(4); err != nil {
			return nil, err
		}
	}
	dnsPort, apiPort, bigPort, ecsPort := ports[0], ports[1], ports[2], ports[3]
	steerDir := filepath.Join(o.Dir, "steer")
	if err := os.MkdirAll(steerDir, 0o755); err != nil {
		return nil, err
	}
	st, err := startSteer(steerDir, dnsPort, apiPort, o.TTL)
	if err != nil {
		return nil, fmt.Errorf("steer: %w", err)
	}
	defer st.stop()
	subnets, err := ecsSubnetsFor(st.configPath(), o)
	if err != nil {
		return nil, err
	}
	steerAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(dnsPort))
	big, err := startUnbound(o.Dir, "big-unbound", bigPort, bigOut, false, steerAddr)
	if err != nil {
		return nil, err
	}
	defer big.stop()
	ecs, err := startUnbound(o.Dir, "ecs-unbound", ecsPort, ecsOut, true, steerAddr)
	if err != nil {
		return nil, err
	}
	defer ecs.stop()
	o.logf("steer on %s, big Unbound on :%d, ECS Unbound on :%d; %s at %.0f user q/s", steerAddr, bigPort, ecsPort, o.Duration, o.Rate)
	pop := Population{Rate: o.Rate, BigShare: o.BigShare, ECSShare: o.ECSShare, Small: o.Small, Subnets: subnets}
	lo := netip.MustParseAddr("127.0.0.1")
	obs, err := generate(genOptions{Pop: pop, Duration: o.Duration, Bin: o.Bin,
		Big: netip.AddrPortFrom(lo, uint16(bigPort)), ECS: netip.AddrPortFrom(lo, uint16(ecsPort)), Steer: steerAddr,
		DrainAt: o.DrainAt, Drain: func() error { return st.setPool("canary", "drain") }, Seed: o.Seed, Prime: time.Duration(o.TTL+1) * time.Second})
	if err != nil {
		return nil, err
	}
	if obs.DrainErr != nil {
		return nil, fmt.Errorf("drain: %w", obs.DrainErr)
	}
	if big.exited() || ecs.exited() {
		return nil, errors.New("an Unbound exited during the run:\n" + big.tail() + ecs.tail())
	}
	counters, err := st.counters("steer_dns_queries_total", "steer_query_log_entries_total")
	if err != nil {
		return nil, err
	}
	st.stop() // flushes and closes the query log
	misses, err := readMisses(st.queryLog(), obs.Start, o.Duration, o.Bin)
	if err != nil {
		return nil, err
	}
	return &Real{Obs: obs, Misses: misses, Config: st.configPath(), Subnets: subnets,
		Queries: counters["steer_dns_queries_total"], LogWritten: counters[`steer_query_log_entries_total{result="written"}`],
		LogDropped: counters[`steer_query_log_entries_total{result="dropped"}`]}, nil
}
