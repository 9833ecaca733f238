// Package anycast owns the node's anycast announcement: an embedded BGP
// speaker (GoBGP as a library, in-process) that originates the service
// prefixes to the configured peers, the self-check that queries the node's
// own DNS listener, the overload detector, and the controller that decides
// from those inputs (and the operator's manual control) whether the
// prefixes are announced, withdrawn or announced with a prepended AS path.
// It does not know about zones, geo databases or health checks: callers
// hand it those as named conditions.
//
// Its metrics (steer_anycast_*, metrics.go) are read at scrape time by a
// Collector from the controller's State and the speaker's sessions.
package anycast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Peer is one BGP neighbour of the speaker.
type Peer struct {
	Address      netip.Addr
	Port         int
	RemoteAS     uint32
	LocalAddress netip.Addr // zero: chosen by the kernel
	HoldTime     time.Duration
	ConnectRetry time.Duration
	Multihop     int    // TTL; 0: directly connected
	Password     string // TCP MD5; empty: none
}

// SpeakerConfig is what the speaker announces and to whom.
type SpeakerConfig struct {
	RouterID netip.Addr
	LocalAS  uint32
	Prefixes []netip.Prefix
	// NextHopV4 and NextHopV6 are the next hops; the zero Addr means
	// "self" (the session's local address).
	NextHopV4, NextHopV6 netip.Addr
	Peers                []Peer
}

// PeerStatus is one neighbour's session as the speaker sees it.
type PeerStatus struct {
	Address  string
	RemoteAS uint32
	// State is the BGP FSM state in lower case: idle, connect, active,
	// opensent, openconfirm or established.
	State string
	// Since is when the session was established (zero unless it is).
	Since time.Time
}

// Established reports whether the session is up.
func (p PeerStatus) Established() bool { return p.State == "established" }

// Speaker is an in-process BGP speaker originating a fixed set of
// prefixes. Its methods are safe for concurrent use.
type Speaker struct {
	cfg    SpeakerConfig
	bgp    *server.BgpServer
	log    *slog.Logger
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
}

// StartSpeaker starts the BGP speaker and adds its peers; nothing is
// announced until Announce. It does not listen for incoming connections
// (the peers are connected to), and graceful restart is off, so a node
// that dies loses its routes as soon as its sessions close.
func StartSpeaker(cfg SpeakerConfig, log *slog.Logger) (*Speaker, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// GoBGP is chatty at info; session changes are logged below instead.
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	glog := slog.New(minLevel{log.Handler(), lv}).With("component", "gobgp")
	s := server.NewBgpServer(server.LoggerOption(glog, lv))
	go s.Serve() // must run before any other call, which would block otherwise
	ctx, cancel := context.WithCancel(context.Background())
	sp := &Speaker{cfg: cfg, bgp: s, log: log, cancel: cancel}
	err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:        cfg.LocalAS,
		RouterId:   cfg.RouterID.String(),
		ListenPort: -1, // no listener: the default would be port 179
	}})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("bgp: start: %w", err)
	}
	// Log every session state change.
	err = s.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
			if ev.Type != apiutil.PEER_EVENT_STATE {
				return
			}
			st := ev.Peer.State
			args := []any{"peer", st.NeighborAddress.String(), "remote_as", st.PeerASN, "state", fsmName(st.SessionState)}
			if st.DisconnectMessage != "" {
				args = append(args, "reason", st.DisconnectMessage)
			}
			log.Info("anycast: BGP session", args...)
		},
	}, server.WatchPeer())
	if err != nil {
		sp.Stop()
		return nil, fmt.Errorf("bgp: watch: %w", err)
	}
	for _, p := range cfg.Peers {
		if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: sp.apiPeer(p)}); err != nil {
			sp.Stop()
			return nil, fmt.Errorf("bgp: peer %s: %w", p.Address, err)
		}
	}
	return sp, nil
}

func (sp *Speaker) apiPeer(p Peer) *api.Peer {
	var fams []*api.AfiSafi
	v4, v6 := false, false
	for _, pr := range sp.cfg.Prefixes {
		v4 = v4 || pr.Addr().Is4()
		v6 = v6 || pr.Addr().Is6()
	}
	if v4 {
		fams = append(fams, &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}})
	}
	if v6 {
		fams = append(fams, &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, Enabled: true}})
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.RemoteAS,
			AuthPassword:    p.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      uint64(p.ConnectRetry / time.Second),
			HoldTime:          uint64(p.HoldTime / time.Second),
			KeepaliveInterval: uint64(max(p.HoldTime/3/time.Second, 1)),
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		// Off: a peer that is "graceful restart aware" keeps a restarting
		// speaker's routes as stale, so a crashed node stayed announced.
		GracefulRestart: &api.GracefulRestart{Enabled: false},
		AfiSafis:        fams,
	}
	if p.LocalAddress.IsValid() {
		ap.Transport.LocalAddress = p.LocalAddress.String()
	}
	if p.Multihop > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.Multihop)}
	}
	return ap
}

// paths builds the speaker's paths; with withdraw they are withdrawals.
// The originated AS path is prepend copies of the local AS: GoBGP adds the
// local AS once more on export to an eBGP peer, which so sees prepend+1.
func (sp *Speaker) paths(prepend int) ([]*apiutil.Path, error) {
	var out []*apiutil.Path
	for _, pr := range sp.cfg.Prefixes {
		nlri, err := bgp.NewIPAddrPrefix(pr)
		if err != nil {
			return nil, err
		}
		fam, nh := bgp.RF_IPv4_UC, sp.cfg.NextHopV4
		if pr.Addr().Is6() {
			fam, nh = bgp.RF_IPv6_UC, sp.cfg.NextHopV6
			if !nh.IsValid() {
				nh = netip.IPv6Unspecified() // self
			}
		} else if !nh.IsValid() {
			nh = netip.IPv4Unspecified() // self
		}
		nha, err := bgp.NewPathAttributeNextHop(nh)
		if err != nil {
			return nil, err
		}
		var seg []bgp.AsPathParamInterface
		if prepend > 0 {
			as := make([]uint32, prepend)
			for i := range as {
				as[i] = sp.cfg.LocalAS
			}
			seg = append(seg, bgp.NewAs4PathParam(bgp.BGP_ASPATH_ATTR_TYPE_SEQ, as))
		}
		out = append(out, &apiutil.Path{
			Family: fam,
			Nlri:   nlri,
			Attrs: []bgp.PathAttributeInterface{
				bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP),
				bgp.NewPathAttributeAsPath(seg),
				nha,
			},
		})
	}
	return out, nil
}

// Announce originates every prefix, with prepend extra copies of the local
// AS in the path (0: none). Announcing again replaces the paths without a
// gap.
func (sp *Speaker) Announce(prepend int) error {
	ps, err := sp.paths(prepend)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	res, err := sp.bgp.AddPath(apiutil.AddPathRequest{Paths: ps})
	if err != nil {
		return fmt.Errorf("bgp: announce: %w", err)
	}
	for i, r := range res {
		if r.Error != nil {
			return fmt.Errorf("bgp: announce %s: %w", sp.cfg.Prefixes[i], r.Error)
		}
	}
	return nil
}

// Withdraw withdraws every prefix. It names each path: a DeletePath with
// neither paths nor UUIDs would delete every local path.
func (sp *Speaker) Withdraw() error {
	ps, err := sp.paths(0)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	for _, p := range ps {
		p.Withdrawal = true
	}
	if err := sp.bgp.DeletePath(apiutil.DeletePathRequest{Paths: ps}); err != nil {
		return fmt.Errorf("bgp: withdraw: %w", err)
	}
	return nil
}

// Peers returns the state of every neighbour's session, by address.
func (sp *Speaker) Peers() []PeerStatus {
	sp.mu.Lock()
	stopped := sp.stopped
	sp.mu.Unlock()
	var out []PeerStatus
	if stopped {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := sp.bgp.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		ps := PeerStatus{}
		if p.Conf != nil {
			ps.Address, ps.RemoteAS = p.Conf.NeighborAddress, p.Conf.PeerAsn
		}
		if p.State != nil {
			ps.State = strings.ToLower(strings.TrimPrefix(p.State.SessionState.String(), "SESSION_STATE_"))
		}
		if ps.Established() && p.Timers != nil && p.Timers.State != nil && p.Timers.State.Uptime != nil {
			ps.Since = p.Timers.State.Uptime.AsTime()
		}
		out = append(out, ps)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		sp.log.Warn("anycast: listing BGP peers", "err", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// Stop closes every session (with a Cease notification) and stops the
// speaker. It is idempotent.
func (sp *Speaker) Stop() {
	sp.mu.Lock()
	if sp.stopped {
		sp.mu.Unlock()
		return
	}
	sp.stopped = true
	sp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sp.bgp.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
		sp.log.Warn("anycast: stopping BGP", "err", err)
	}
	sp.cancel()
}

func fsmName(s bgp.FSMState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BGP_FSM_"))
}

// minLevel passes on records at or above its level only.
type minLevel struct {
	slog.Handler
	min slog.Leveler
}

// Enabled implements slog.Handler.
func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min.Level() && h.Handler.Enabled(ctx, l)
}

// WithAttrs implements slog.Handler.
func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

// WithGroup implements slog.Handler.
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
