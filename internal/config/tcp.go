package config

import (
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/tcplimit"
)

// TCP holds the TCP transport's limits. Its max_connections and
// per_prefix keys are those of tcplimit.Limits, decoded into it (see that
// type for each key's meaning, range and default, and for how a connection
// over a limit closes the longest-idle one), plus the two durations below.
// The node hands Limits to the DNS server as it is.
type TCP struct {
	// Limits holds the server's connection limits, the keys the file
	// leaves out taken from tcplimit's defaults; its FirstQuery is
	// first_query_timeout, its Idle 0 (the snapshot's idle_timeout).
	tcplimit.Limits `yaml:",inline"`
	// IdleTimeout closes a connection that sends no complete query for
	// this long, and is the keepalive edns-tcp-keepalive advertises; it
	// goes to the snapshot (TCPIdleTimeout). Default tcplimit.DefaultIdle.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// FirstQueryTimeout is first_query_timeout as the file writes it;
	// Limits.FirstQuery holds it, or its default, once loaded.
	FirstQueryTimeout Duration `yaml:"first_query_timeout"`
}

func (t *TCP) applyDefaults() {
	if t.IdleTimeout == 0 {
		t.IdleTimeout = Duration(tcplimit.DefaultIdle)
	}
	t.FirstQuery = time.Duration(t.FirstQueryTimeout)
	t.Limits.SetDefaults()
}

// checkTCP reports each tcp key outside its range, at its line; a
// configuration that passes gives Limits that tcplimit.Limits.Validate
// accepts.
func (c *Config) checkTCP(probs *diag.Problems) {
	f, t := c.File, &c.TCP
	if t.MaxConns < 0 {
		probs.Add(f, c.Line("tcp.max_connections"), "tcp.max_connections: must be positive")
	} else if t.MaxConns > tcplimit.MaxConnsBound {
		probs.Add(f, c.Line("tcp.max_connections"), "tcp.max_connections: %d is more than %d", t.MaxConns, tcplimit.MaxConnsBound)
	}
	if t.IdleTimeout < 0 {
		probs.Add(f, c.Line("tcp.idle_timeout"), "tcp.idle_timeout: must be positive")
	}
	if t.PerPrefix < 1 || t.MaxConns > 0 && t.PerPrefix > t.MaxConns {
		probs.Add(f, c.Line("tcp.per_prefix"), "tcp.per_prefix: %d is not between 1 and tcp.max_connections (%d)", t.PerPrefix, t.MaxConns)
	}
	if d := t.FirstQuery; d < tcplimit.MinTimeout || d > tcplimit.MaxTimeout {
		probs.Add(f, c.Line("tcp.first_query_timeout"), "tcp.first_query_timeout: %s is not between 100ms and 6553.5s", d)
	}
}
