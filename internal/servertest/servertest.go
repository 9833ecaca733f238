// Package servertest starts steer servers for tests: in process on free
// loopback ports, from a configuration written to a temporary directory.
// The clients to query them with are in package dnstest.
package servertest

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/snapshot"
)

// Server is a running in-process steer.
type Server struct {
	*dnsserver.Server
	// Dir holds the configuration and the files it names.
	Dir string
	// ConfigPath is the configuration file.
	ConfigPath string
	// V4 and V6 are the loopback addresses it listens on (UDP and TCP share
	// each port). V6 is invalid when the machine has no ::1.
	V4, V6 netip.AddrPort
}

// Start writes files into a new temporary directory, loads "steer.yaml"
// from it and serves on free ports of 127.0.0.1 and ::1 (the listen key in
// the file is replaced). The server stops when the test ends.
func Start(t testing.TB, files map[string]string) *Server {
	t.Helper()
	dir := t.TempDir()
	dnstest.WriteFiles(t, dir, files)
	path := filepath.Join(dir, "steer.yaml")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Listen = []string{"127.0.0.1:0"}
	if dnstest.HaveIPv6() {
		cfg.Listen = append(cfg.Listen, "[::1]:0")
	}
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	srv := dnsserver.New(snap, nil)
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	s := &Server{Server: srv, Dir: dir, ConfigPath: path}
	for _, a := range srv.Addrs() {
		if a.Addr().Is4() {
			s.V4 = a
		} else {
			s.V6 = a
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return s
}

// Reload re-reads the server's configuration from disk, keeping its
// listeners, as SIGHUP does. It returns the load error, if any.
func (s *Server) Reload() error {
	cfg, err := config.Load(s.ConfigPath)
	if err != nil {
		return err
	}
	cfg.Listen = s.Handler().Snapshot().Listen
	snap, _, err := snapshot.Build(cfg)
	if err != nil {
		return err
	}
	return s.Apply(snap)
}
