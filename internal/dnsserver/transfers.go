package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// Transfers answers what the query path leaves to the node: zone
// transfers out (AXFR and IXFR, RFC 5936 and 1995) and NOTIFY (RFC 1996).
// Without one, a transfer is refused and a NOTIFY is answered NOTIMP.
type Transfers interface {
	// Transfer answers the AXFR or IXFR request req, received on the TCP
	// connection c, writing every response message (length-prefixed) on c
	// itself. An error closes the connection.
	Transfer(c net.Conn, req []byte) error
	// Answer answers, over t, a NOTIFY (opcode 4), an IXFR request, or
	// any query signed with TSIG (whose response must be signed: the
	// handler's Unsigned gives the answer to sign); nil leaves it to the
	// default (NOTIMP, REFUSED, NOTAUTH).
	Answer(req []byte, from netip.Addr, t Transport) []byte
}

// SetTransfers makes the handler pass zone transfers and NOTIFYs to x
// (set before serving; nil: none).
func (h *Handler) SetTransfers(x Transfers) { h.xfr = x }

// Unsigned answers req, which carries no TSIG, as HandleFrom would,
// without counting it: Transfers.Answer signs what it returns and the
// signed response is the one counted.
func (h *Handler) Unsigned(req []byte, t Transport, from netip.Addr) []byte {
	var st stats
	return h.handle(req, t, from, make([]byte, 0, 4096), nil, &st)
}

// badKey answers a signed request when no key is configured: NOTAUTH with
// a TSIG error BADKEY, unsigned (RFC 8945 §5.2.1).
func badKey(req []byte, buf []byte) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil {
		return nil
	}
	out, err := tsig.ErrorReply(m, dns.ErrSecret).PackBuffer(buf)
	if err != nil {
		return nil
	}
	return out
}

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
