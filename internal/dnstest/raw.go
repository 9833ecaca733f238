package dnstest

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"time"
)

// ExchangeRaw sends pkt to addr over network ("udp" or "tcp", framed) and
// returns the first response.
func ExchangeRaw(network string, addr netip.AddrPort, pkt []byte) ([]byte, error) {
	c, err := net.DialTimeout(network, addr.String(), 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if network == "udp" {
		if _, err := c.Write(pkt); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	if _, err := c.Write(Frame(pkt)); err != nil {
		return nil, err
	}
	return ReadFrame(c)
}

// Frame prefixes pkt with its length, as DNS over TCP sends it.
func Frame(pkt []byte) []byte {
	out := make([]byte, 2+len(pkt))
	binary.BigEndian.PutUint16(out, uint16(len(pkt)))
	copy(out[2:], pkt)
	return out
}

// ReadFrame reads one length-prefixed DNS message, as DNS over TCP sends it.
func ReadFrame(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
