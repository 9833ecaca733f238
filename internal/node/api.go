package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/ui"
)

// apiWiring runs the admin API as configured: a reload moves it to a new
// listen address, rotates its token, and turns it on or off.
type apiWiring struct {
	log        *slog.Logger
	newHandler func() *api.Handler // the API over the node (backend)

	mu     sync.Mutex
	h      *api.Handler
	listen string // as configured; "" when off
	bound  string
	token  string // in force
	stopFn func(context.Context) error
	// cert is the listener's certificate (api.tls_cert_file; nil: plain
	// HTTP), which commit sets: a reload renews it, or turns TLS on or
	// off, on the same listener.
	cert *atomic.Pointer[tls.Certificate]
}

// problem is one problem at cfg's line for key, as a diag.Problems error.
func problem(cfg *config.Config, key, format string, args ...any) error {
	var ps diag.Problems
	ps.Add(cfg.File, cfg.Line(key), format, args...)
	return ps
}

// refuseReason is why changes through the API are refused: no token and
// an address that is not loopback (a host name counts as not loopback,
// unless it is localhost). "" when changes are allowed.
func refuseReason(c config.API, token string) string {
	if token != "" || c.TokenFile != "" || c.TokenEnv != "" || c.Listen == "" {
		return ""
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err == nil {
		if host == "localhost" {
			return ""
		}
		if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
			return ""
		}
	}
	return fmt.Sprintf("changes refused: the admin API listens on %s, which is not a loopback address, and has no token (set api.token_file or api.token_env)", c.Listen)
}

// apiChange is a prepared change: a listener already bound at the new
// address, or none when the address is the same.
type apiChange struct {
	a      *apiWiring
	cfg    *config.Config
	listen string
	bound  string
	stop   func(context.Context) error
	h      *api.Handler
	cert   *atomic.Pointer[tls.Certificate] // the new listener's
}

// prepare binds the new address when it changed (so a taken port rejects
// the reload with nothing changed).
func (a *apiWiring) prepare(cfg *config.Config) (*apiChange, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := &apiChange{a: a, cfg: cfg, listen: cfg.API.Listen}
	if ch.listen == "" || ch.listen == a.listen && a.h != nil {
		return ch, nil
	}
	ch.h = a.newHandler()
	ui.Mount(ch.h)
	ch.h.SetUIPublic(cfg.API.UIPublic)
	ch.cert = new(atomic.Pointer[tls.Certificate])
	ch.cert.Store(cfg.API.TLSCert)
	// The new address serves with the new token from its first request:
	// the reload that moves the API may yet take a while to commit, and
	// an unauthenticated window on a new address is an open door.
	token := cfg.API.Token.Value()
	ch.h.SetAuth(token, refuseReason(cfg.API, token))
	conns := cfg.API.MaxConnections
	if conns == 0 {
		conns = config.DefaultAPIMaxConnections
	}
	bound, stop, err := api.ServeTLS(context.Background(), ch.listen, ch.h, a.log, conns, ch.cert)
	if err != nil {
		return nil, problem(cfg, "api.listen", "api.listen: %v", err)
	}
	ch.bound, ch.stop = bound, stop
	return ch, nil
}

func (c *apiChange) abort() {
	if c != nil && c.stop != nil {
		c.stop(context.Background())
	}
}

// commit switches to the prepared listener (stopping the old one), sets
// the token and the refusal, and says what changed.
func (c *apiChange) commit(token string) []string {
	a := c.a
	a.mu.Lock()
	var changed []string
	var oldStop func(context.Context) error
	switch {
	case c.stop != nil:
		if a.stopFn != nil {
			changed = append(changed, fmt.Sprintf("api.listen %s -> %s", a.listen, c.listen))
		}
		oldStop = a.stopFn
		a.h, a.stopFn, a.bound, a.cert = c.h, c.stop, c.bound, c.cert
	case c.listen == "" && a.stopFn != nil:
		oldStop = a.stopFn
		a.h, a.stopFn, a.bound, a.cert = nil, nil, "", nil
		changed = append(changed, "api off")
	}
	if a.cert != nil {
		old, cert := a.cert.Swap(c.cfg.API.TLSCert), c.cfg.API.TLSCert
		switch {
		case old == nil && cert != nil && c.stop == nil:
			changed = append(changed, "api tls on")
		case old != nil && cert == nil:
			changed = append(changed, "api tls off")
		case old != nil && cert != nil && !bytes.Equal(old.Certificate[0], cert.Certificate[0]):
			changed = append(changed, "api certificate renewed")
		}
	}
	a.listen = c.listen
	if a.h != nil && token != a.token && a.token != "" {
		changed = append(changed, "api token rotated")
	}
	a.token = token
	h := a.h
	a.mu.Unlock()
	if oldStop != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		oldStop(ctx)
		cancel()
	}
	if h != nil {
		refuse := refuseReason(c.cfg.API, token)
		h.SetAuth(token, refuse)
		h.SetUIPublic(c.cfg.API.UIPublic)
		if refuse != "" {
			a.log.Warn("the admin API has no token and does not listen on loopback: it answers reads but refuses every change", "listen", c.listen)
		}
	}
	return changed
}

func (a *apiWiring) addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bound
}

func (a *apiWiring) stop(ctx context.Context) {
	a.mu.Lock()
	stop := a.stopFn
	a.stopFn, a.h = nil, nil
	a.mu.Unlock()
	if stop != nil {
		stop(ctx)
	}
}
