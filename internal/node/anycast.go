package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/anycast"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/health"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/snapshot"
)

// anycastWiring connects the anycast controller to the running server:
// its conditions come from the current snapshot (configuration, zones,
// geo databases) and the health manager (the health score), its
// self-check queries the server's own listener, and its query rate comes
// from the metrics counters (read once per sample, off the query path).
type anycastWiring struct {
	cfg     *config.Anycast
	srv     *dnsserver.Server
	health  *health.Manager // its checked targets make the health score
	log     *slog.Logger
	speaker *anycast.Speaker
	ctl     *anycast.Controller
	cancel  context.CancelFunc
}

// startAnycast starts the BGP speaker and the controller when the
// configuration has an anycast section; otherwise it returns nil, whose
// methods do nothing. The settings are those of the starting
// configuration: a reload does not change them.
func startAnycast(log *slog.Logger, snap *snapshot.Snapshot, srv *dnsserver.Server, hm *health.Manager, met *metrics.Metrics, reg prometheus.Registerer) (*anycastWiring, error) {
	c := snap.Config.Anycast
	if c == nil {
		return nil, nil
	}
	// The addresses were decoded and the password files read with the
	// configuration.
	sc := anycast.SpeakerConfig{
		RouterID:  c.RouterIP,
		LocalAS:   uint32(c.LocalAS),
		Prefixes:  c.Announce,
		NextHopV4: c.NextHop4,
		NextHopV6: c.NextHop6,
	}
	for _, p := range c.Peers {
		sc.Peers = append(sc.Peers, anycast.Peer{
			Address:      p.IP,
			LocalAddress: p.LocalIP,
			Port:         p.Port,
			RemoteAS:     uint32(p.RemoteAS),
			HoldTime:     time.Duration(p.HoldTime),
			ConnectRetry: time.Duration(p.ConnectRetry),
			Multihop:     p.Multihop,
			Password:     p.Password.Value(),
		})
	}
	sp, err := anycast.StartSpeaker(sc, log)
	if err != nil {
		return nil, err
	}
	a := &anycastWiring{cfg: c, srv: srv, health: hm, log: log, speaker: sp}
	self := &anycast.SelfCheck{
		Name:     c.SelfCheck.Name,
		Qtype:    c.SelfCheck.QType,
		Interval: time.Duration(c.SelfCheck.Interval),
		Timeout:  time.Duration(c.SelfCheck.Timeout),
		Rise:     c.SelfCheck.Rise,
		Fall:     c.SelfCheck.Fall,
		Target:   a.selfTarget,
	}
	a.ctl = anycast.NewController(sp, anycast.Options{
		Standby:    c.Mode == "standby",
		Prepend:    c.Overload.Prepend,
		QPSAbove:   c.Overload.QPSAbove,
		Conditions: a.conditions,
		SelfCheck:  self,
		Queries:    met.QueriesTotal,
		Log:        log,
	})
	self.OnChange = a.ctl.Poke
	// Health results change the score: evaluate at once rather than at
	// the next tick.
	hm.OnChange(a.ctl.Poke)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go self.Run(ctx)
	go a.ctl.Run(ctx)
	reg.MustRegister(anycast.NewCollector(anycast.MetricsSource{State: a.ctl.State, Peers: a.speaker.Peers,
		Prefixes: len(c.Prefixes), HealthScore: func() float64 { s, _, _ := a.healthScore(); return s }}))
	log.Info("anycast: BGP speaker started", "router_id", c.RouterID, "local_as", c.LocalAS,
		"prefixes", strings.Join(c.Prefixes, " "), "peers", len(c.Peers), "mode", c.Mode)
	return a, nil
}

// selfTarget is the address the self-check queries: the first listener,
// with a wildcard replaced by loopback of its family.
func (a *anycastWiring) selfTarget() (netip.AddrPort, bool) {
	addrs := a.srv.Addrs()
	if len(addrs) == 0 {
		return netip.AddrPort{}, false
	}
	slices.SortFunc(addrs, func(x, y netip.AddrPort) int { return x.Compare(y) })
	ap := addrs[0]
	if ap.Addr().IsUnspecified() {
		lo := netip.IPv6Loopback()
		if ap.Addr().Unmap().Is4() {
			lo = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		ap = netip.AddrPortFrom(lo, ap.Port())
	}
	return ap, true
}

// healthScore is the share of this node's checked targets whose checks
// pass: targets not checked yet do not count, nor do operator overrides
// (a drained target is planned, not a failure). No checked target: 1.
func (a *anycastWiring) healthScore() (score float64, up, checked int) {
	for _, s := range a.health.Snapshot() {
		switch s.Status {
		case health.Up:
			up++
			checked++
		case health.Down:
			checked++
		}
	}
	if checked == 0 {
		return 1, 0, 0
	}
	return float64(up) / float64(checked), up, checked
}

// conditions are config, geo and health; the controller adds the
// self-check after config.
func (a *anycastWiring) conditions() []anycast.Condition {
	snap := a.srv.Handler().Snapshot()
	cfg := anycast.Condition{Name: "config", OK: true}
	switch {
	case snap == nil:
		cfg.OK, cfg.Detail = false, "no configuration loaded"
	case servingZones(snap) == 0:
		cfg.OK, cfg.Detail = false, "no zone loaded"
	default:
		cfg.Detail = fmt.Sprintf("loaded %s", snap.Loaded.Format(time.RFC3339))
	}
	geo := anycast.Condition{Name: "geo", OK: true, Detail: "no steered record needs one"}
	if snap != nil && snap.Policies != nil && len(snap.Policies.Records) > 0 {
		if snap.Geo == nil || len(snap.Geo.DBs) == 0 {
			geo.OK, geo.Detail = false, "no geo database loaded"
		} else {
			var names []string
			for _, d := range snap.Geo.DBs {
				names = append(names, d.Name)
			}
			geo.Detail = "loaded: " + strings.Join(names, ", ")
		}
	}
	score, up, checked := a.healthScore()
	min := a.cfg.Threshold()
	h := anycast.Condition{Name: "health", OK: score >= min,
		Detail: fmt.Sprintf("score %.2f (%d of %d checked targets up), withdraw below %.2f", score, up, checked, min)}
	if checked == 0 {
		h.Detail = fmt.Sprintf("score 1.00 (no checked targets), withdraw below %.2f", min)
	}
	return []anycast.Condition{cfg, geo, h}
}

// drain withdraws the prefixes for a shutdown and, when they had been
// announced, keeps answering DNS for the drain period so that queries
// already routed here are answered while the withdrawal propagates.
func (a *anycastWiring) drain() {
	if a == nil {
		return
	}
	was, err := a.ctl.Shutdown()
	if err != nil {
		a.log.Error("anycast: withdrawal at shutdown failed; closing the sessions instead", "err", err)
		a.speaker.Stop()
	}
	if d := a.cfg.DrainPeriod(); was && d > 0 {
		a.log.Info("anycast: withdrawn; still answering DNS for the drain period", "drain", d)
		time.Sleep(d)
	}
}

// stop ends the self-check and controller and closes the BGP sessions.
func (a *anycastWiring) stop() {
	if a == nil {
		return
	}
	a.cancel()
	a.speaker.Stop()
}

// status is the anycast part of the admin API.
func (a *anycastWiring) status() *api.AnycastStatus {
	if a == nil {
		return nil
	}
	st := a.ctl.State()
	out := &api.AnycastStatus{
		Mode: st.Mode, Control: st.Control.String(), Announced: st.Announced,
		Prefixes: a.cfg.Prefixes, Reason: st.Reason, Detail: st.Detail, Since: st.Since,
		QPS: st.QPS, Overloaded: st.Overloaded, Transitions: st.Transitions,
		Conditions: []api.AnycastCondition{}, Peers: []api.AnycastPeer{},
	}
	out.HealthScore, _, _ = a.healthScore()
	if st.Announced {
		// Originated with Prepend copies; each eBGP peer sees one more.
		for range st.Prepend + 1 {
			out.ASPath = append(out.ASPath, uint32(a.cfg.LocalAS))
		}
	}
	for _, c := range st.Conditions {
		out.Conditions = append(out.Conditions, api.AnycastCondition{Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	for _, p := range a.speaker.Peers() {
		ap := api.AnycastPeer{Address: p.Address, RemoteAS: p.RemoteAS, State: p.State}
		if p.Established() && !p.Since.IsZero() {
			s := p.Since
			ap.Since = &s
			ap.Uptime = time.Since(s).Round(time.Second).String()
		}
		out.Peers = append(out.Peers, ap)
	}
	return out
}

// Anycast implements api.AnycastBackend.
func (b *backend) Anycast() (*api.AnycastStatus, error) {
	if b.n.ac == nil {
		return nil, fmt.Errorf("anycast is not configured: %w", api.ErrNotFound)
	}
	return b.n.ac.status(), nil
}

// SetAnycastControl implements api.AnycastBackend.
func (b *backend) SetAnycastControl(control string) (*api.AnycastStatus, error) {
	if b.n.ac == nil {
		return nil, fmt.Errorf("anycast is not configured: %w", api.ErrNotFound)
	}
	ctl, err := anycast.ParseControl(control)
	if err != nil {
		return nil, err
	}
	b.n.ac.ctl.SetControl(ctl)
	return b.n.ac.status(), nil
}

// servingZones counts the zones that answer (not SERVFAIL stand-ins).
func servingZones(snap *snapshot.Snapshot) int {
	n := 0
	for _, z := range snap.Zones.Zones() {
		if z.Failed == "" {
			n++
		}
	}
	return n
}
