//go:build !(linux && (amd64 || arm64))

package dnsserver

import (
	"errors"
	"net/netip"
)

// rawUDPSupported says this platform has the batched transport; elsewhere
// UDP goes through the standard network poller.
const rawUDPSupported = false

type rawUDP struct{ local netip.AddrPort }

func listenRawUDP(netip.AddrPort) (*rawUDP, error) {
	return nil, errors.New("dnsserver: batched UDP is Linux-only")
}

func (u *rawUDP) Close() error { return nil }

func (s *Server) serveRaw(u *rawUDP) { s.wg.Done() }

func (u *rawUDP) release() {}

func rawReaders() int { return 1 }
