package node

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/tcplimit"
)

// guardWiring turns the rrl, cookies and tcp keys into the DNS server's
// abuse protection, at start-up and on every reload. The rate limiter
// keeps its buckets across a reload that leaves its settings alone; the
// node's random cookie secret (when no secret_file is set) lasts as long
// as the process, so cookies handed out stay valid across reloads.
type guardWiring struct {
	log     *slog.Logger
	srv     *dnsserver.Server // the server it guards
	random  *cookie.Jar
	limiter *rrl.Limiter
	rrlCfg  rrl.Config
}

// guardPlan is a guard built from a configuration, not yet applied.
type guardPlan struct {
	guard   *dnsserver.Guard
	rrlCfg  rrl.Config
	tcp     tcplimit.Limits
	changes []string
}

func newGuard(log *slog.Logger, srv *dnsserver.Server, reg prometheus.Registerer) *guardWiring {
	g := &guardWiring{log: log, srv: srv, random: cookie.Random()}
	reg.MustRegister(rrl.NewCollector(func() *rrl.Limiter {
		if gd := srv.Handler().Guard(); gd != nil {
			return gd.RRL
		}
		return nil
	}))
	return g
}

// prepare reads the secret file and builds the limiter cfg asks for; an
// error (file:line) leaves the node as it was.
func (g *guardWiring) prepare(cfg *config.Config) (*guardPlan, error) {
	p := &guardPlan{guard: &dnsserver.Guard{}}
	var probs diag.Problems
	c := cfg.Cookies
	if *c.Enabled {
		p.guard.Cookies = g.random
		if c.SecretFile != "" {
			path := cfg.Resolve(c.SecretFile)
			data, err := config.ReadFile(cfg.FS, path)
			var jar *cookie.Jar
			if err == nil {
				jar, err = cookie.Parse(data, path)
			}
			if err != nil {
				probs.Add(cfg.File, cfg.Line("cookies.secret_file"), "cookies.secret_file: %v", err)
			}
			p.guard.Cookies = jar
		}
		p.guard.MaxNoCookieUDP = c.MaxNoCookieUDP
	}
	if cfg.RRL.Enabled {
		p.rrlCfg = cfg.RRL.Config // decoded and checked with the configuration
		if g.limiter != nil && sameRRL(g.rrlCfg, p.rrlCfg) {
			p.guard.RRL = g.limiter
		} else {
			l, err := rrl.New(p.rrlCfg)
			if err != nil {
				probs.Add(cfg.File, cfg.Line("rrl"), "%v", err)
			}
			p.guard.RRL = l
			if g.limiter != nil {
				p.changes = append(p.changes, "rrl: new settings (the buckets start empty)")
			}
		}
	} else if g.limiter != nil {
		p.changes = append(p.changes, "rrl: off")
	}
	p.tcp = cfg.TCP.Limits // decoded and checked with the configuration; Idle 0 is the snapshot's tcp.idle_timeout
	if err := p.tcp.Validate(); err != nil {
		probs.Add(cfg.File, cfg.Line("tcp"), "tcp: %v", err)
	}
	if err := probs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// commit installs the plan: queries that start after it see it.
func (g *guardWiring) commit(p *guardPlan) []string {
	old := g.srv.Handler().Guard()
	g.srv.Handler().SetGuard(p.guard)
	if err := g.srv.SetTCPLimits(p.tcp); err != nil {
		// prepare validated the same limits.
		g.log.Error("tcp limits", "err", err)
	}
	g.limiter, g.rrlCfg = p.guard.RRL, p.rrlCfg
	changes := p.changes
	if old != nil && old.Cookies != p.guard.Cookies && p.guard.Cookies != nil && p.guard.Cookies != g.random {
		changes = append(changes, "cookies: secret file read")
	}
	if old != nil && (old.Cookies == nil) != (p.guard.Cookies == nil) {
		changes = append(changes, fmt.Sprintf("cookies: enabled %v", p.guard.Cookies != nil))
	}
	return changes
}

// sameRRL reports whether two limiter configurations are the same.
func sameRRL(a, b rrl.Config) bool {
	return slices.Equal(a.Exempt, b.Exempt) && a.ResponsesPerSecond == b.ResponsesPerSecond && a.Window == b.Window &&
		a.Slip == b.Slip && a.IPv4Prefix == b.IPv4Prefix && a.IPv6Prefix == b.IPv6Prefix && a.ECSAware == b.ECSAware &&
		a.AllPerSecond == b.AllPerSecond && a.LogOnly == b.LogOnly && a.TableSize == b.TableSize
}
