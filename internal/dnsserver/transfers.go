package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// Transfers answers what the query path leaves to the node: zone
// transfers out (AXFR and IXFR, RFC 5936 and 1995) and NOTIFY (RFC 1996).
// Without one, a transfer is refused and a NOTIFY is answered NOTIMP.
type Transfers interface {
	// Transfer answers the AXFR or IXFR request req, received on the TCP
	// connection c, writing every response message (length-prefixed) on c
	// itself. An error closes the connection.
	Transfer(c net.Conn, req []byte) error
	// Answer answers, over t, an IXFR request or a NOTIFY (opcode 4)
	// from from; nil leaves it to the default (REFUSED, NOTIMP).
	Answer(req []byte, from netip.Addr, t Transport) []byte
}

// SetTransfers makes the handler pass zone transfers and NOTIFYs to x
// (set before serving; nil: none).
func (h *Handler) SetTransfers(x Transfers) { h.xfr = x }

// isTransfer reports whether req is a QUERY for AXFR or IXFR, reading the
// header and question only.
func isTransfer(req []byte) bool {
	if len(req) < headerLen+5 || req[2]&0xF8 != 0 || binary.BigEndian.Uint16(req[4:]) != 1 {
		return false
	}
	i := headerLen
	for i < len(req) {
		l := int(req[i])
		if l == 0 {
			i++
			break
		}
		if l&0xC0 != 0 {
			return false
		}
		i += 1 + l
	}
	if i+4 > len(req) {
		return false
	}
	t := binary.BigEndian.Uint16(req[i:])
	return t == dns.TypeAXFR || t == dns.TypeIXFR
}
