package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/simulate"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Model says how the scenario describes the real resolvers. The zero
// value is the honest description; the other fields make a deliberately
// wrong one (the harness must reject those).
type Model struct {
	// TTL replaces the record's TTL in the prediction (0: the config's).
	TTL time.Duration
	// BigCount splits the big site's load over this many independent
	// resolvers (0 or 1: one cache, as it is).
	BigCount int
	// CanaryWeight sets the canary's weight in the prediction (0: the
	// config's 5; the stable pool gets 100 minus it).
	CanaryWeight int
	// NoClock leaves out Unbound's whole-second clock (the entries' TTL
	// clamps).
	NoClock bool
}

// scenarioYAML is the population as a simulate scenario: the same client
// groups, resolver sites and drain the generator and the Unbounds play.
//
// Unbound keeps time in whole seconds: an answer received during second s
// with TTL T is served until second s+T ends, so it lives between T and
// T+1 s. A busy cache (the big site, hundreds of queries a second) asks
// again in the first moments of second s+T+1 and is refilled on a second
// boundary, so from the second fill on its entries live T+1 s; a quiet
// one (an ECS scope block, about one query a second) is refilled at a
// random moment, so its entries live T+U(0,1) s, T+0.5 s on average. The
// scenario says so with TTL clamps (min: T+1 s for the big site, T+0.5 s
// for the ECS site). The emulated small resolvers keep an answer exactly
// its TTL from when it arrives: no clamp.
func scenarioYAML(o Options, subnets []netip.Prefix, wrong Model) string {
	var b strings.Builder
	ttl := time.Duration(o.TTL) * time.Second
	fmt.Fprintf(&b, "# The population bench/simcheck plays against steer through real Unbounds.\n")
	fmt.Fprintf(&b, "duration: %s\nbin: %s\nseed: %d\nruns: %d\nrecord: %s\ntype: A\n",
		simulate.Duration(o.Duration), simulate.Duration(o.Bin), o.Seed, o.Runs, strings.TrimSuffix(recordName, "."))
	if wrong.TTL > 0 {
		ttl = wrong.TTL
		fmt.Fprintf(&b, "ttl_override: %s\n", simulate.Duration(wrong.TTL))
	}
	rates := Population{Rate: o.Rate, BigShare: o.BigShare, ECSShare: o.ECSShare}.siteRates()
	fmt.Fprintf(&b, "clients:\n")
	// The big site's users: one subnet (it sends no ECS, so which does
	// not matter), or one per resolver when the wrong model spreads them.
	fmt.Fprintf(&b, "  - {name: big-users, prefixes: [10.0.0.0/16], subnets: %d, rate: %g}\n", max(wrong.BigCount, 1), rates[siteBig])
	fmt.Fprintf(&b, "  - name: ecs-users\n    rate: %g\n    prefixes:\n", rates[siteECS])
	for _, p := range subnets {
		fmt.Fprintf(&b, "      - %s\n", p)
	}
	fmt.Fprintf(&b, "  - {name: small-users, prefixes: [10.1.0.0/16], subnets: %d, rate: %g}\n", o.Small, rates[siteSmall])
	bigClamp, ecsClamp := "\n    ttl: {min: "+simulate.Duration(ttl+time.Second).String()+"}",
		"\n    ttl: {min: "+simulate.Duration(ttl+time.Second/2).String()+"}"
	if wrong.NoClock {
		bigClamp, ecsClamp = "", ""
	}
	bigCount := max(wrong.BigCount, 1)
	bigAddr := bigOut.String()
	if bigCount > 1 {
		bigAddr = "127.0.2.0/23"
	}
	fmt.Fprintf(&b, `resolvers:
  - name: big-unbound
    groups: [big-users]
    share: 1
    count: %d
    address: %s%s
  - name: ecs-unbound
    groups: [ecs-users]
    share: 1
    address: %s
    ecs: {v4: 24, v6: 56, honors_scope: true}%s
  - name: small
    groups: [small-users]
    share: 1
    count: %d
    address: %s
`, bigCount, bigAddr, bigClamp, ecsOut, ecsClamp, o.Small, smallNet)
	var events []string
	if wrong.CanaryWeight > 0 {
		events = append(events, fmt.Sprintf("  - {at: 0s, set_weights: {canary: %d, stable: %d}}\n", wrong.CanaryWeight, 100-wrong.CanaryWeight))
	}
	if o.DrainAt > 0 {
		events = append(events, fmt.Sprintf("  - {at: %s, drain: canary}\n", simulate.Duration(o.DrainAt)))
	}
	if len(events) > 0 {
		b.WriteString("events:\n" + strings.Join(events, ""))
	}
	return b.String()
}

// predict writes the scenario into dir/name.yaml and runs the simulator
// on it against steer's configuration.
func predict(dir, name, configPath string, o Options, subnets []netip.Prefix, wrong Model) (*simulate.Result, *simulate.Model, error) {
	text := scenarioYAML(o, subnets, wrong)
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return nil, nil, err
	}
	sc, err := simulate.ParseScenario(file, []byte(text))
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, nil, err
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		return nil, nil, err
	}
	m, err := simulate.Compile(sc, simulate.Base{Config: cfg, Geo: snap.Geo, Table: snap.Policies})
	if err != nil {
		return nil, nil, err
	}
	r, err := simulate.Run(context.Background(), m, simulate.Options{Workers: 1})
	if err != nil {
		return nil, nil, err
	}
	return r, m, nil
}
