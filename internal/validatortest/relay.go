package validatortest

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// ECSRelay listens on a free loopback port (UDP and TCP) and passes every
// query on to upstream with its ECS option set to client, then passes the
// upstream's response back byte for byte. It gives a validator that
// cannot send ECS (delv) the answer the server gives that client subnet:
// only the query is changed, never what the validator checks. It stops
// when the test ends.
func ECSRelay(t testing.TB, upstream netip.AddrPort, client netip.Prefix) netip.AddrPort {
	t.Helper()
	var (
		pc  net.PacketConn
		ln  net.Listener
		err error
	)
	for tries := 0; ; tries++ {
		port := dnstest.FreePort(t)
		addr := loopback(port).String()
		if pc, err = net.ListenPacket("udp", addr); err == nil {
			if ln, err = net.Listen("tcp", addr); err == nil {
				break
			}
			pc.Close()
		}
		if tries == 5 {
			t.Fatalf("ECS relay: %v", err)
		}
	}
	t.Cleanup(func() { pc.Close(); ln.Close() })
	rewrite := func(q []byte) ([]byte, error) {
		m := new(dns.Msg)
		if err := m.Unpack(q); err != nil {
			return nil, err
		}
		opt := m.IsEdns0()
		if opt == nil {
			m.SetEdns0(1232, false)
			opt = m.IsEdns0()
		}
		kept := opt.Option[:0]
		for _, o := range opt.Option {
			if o.Option() != dns.EDNS0SUBNET {
				kept = append(kept, o)
			}
		}
		fam := uint16(1)
		if client.Addr().Is6() {
			fam = 2
		}
		opt.Option = append(kept, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam,
			SourceNetmask: uint8(client.Bits()), Address: net.IP(client.Masked().Addr().AsSlice())})
		return m.Pack()
	}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q, err := rewrite(buf[:n])
			if err != nil {
				continue
			}
			go func() {
				if resp, err := dnstest.ExchangeRaw("udp", upstream, q); err == nil {
					pc.WriteTo(resp, from)
				}
			}()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					pkt, err := dnstest.ReadFrame(c)
					if err != nil {
						return
					}
					q, err := rewrite(pkt)
					if err != nil {
						return
					}
					resp, err := dnstest.ExchangeRaw("tcp", upstream, q)
					if err != nil {
						return
					}
					if _, err := c.Write(dnstest.Frame(resp)); err != nil && !errors.Is(err, net.ErrClosed) {
						return
					}
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}
