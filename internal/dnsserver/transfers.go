package dnsserver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// Transfers answers what the query path passes on to the zone transfer
// service (package xfr's Service): zone transfers out (AXFR and IXFR, RFC
// 5936 and 1995) and NOTIFY (RFC 1996). The handler verifies, strips and
// signs TSIG itself (tsig.go), so the service sees requests whose key
// verified, and every answer but a transfer's passes the guard. Without
// one, a transfer is refused and a NOTIFY is answered NOTIMP.
type Transfers interface {
	// Transfer answers an AXFR or IXFR request received over TCP from
	// the address from, writing every response message on w, which signs
	// each one when req was signed; w.TsigStatus() non-nil says req's
	// TSIG did not verify. An error closes the connection.
	Transfer(w dns.ResponseWriter, req *dns.Msg, from netip.Addr) error
	// Answer answers a NOTIFY, or an IXFR request over UDP; req is
	// without its TSIG record, and key is the canonical name of the key
	// it was signed with and that verified ("" for an unsigned request).
	// The handler sends the reply through the guard and signs it with
	// that key. nil leaves req to the handler's own answer (NOTIMP,
	// REFUSED).
	Answer(req *dns.Msg, from netip.Addr, key string) *dns.Msg
	// Refused is told of a signed request whose TSIG did not verify,
	// which the handler answers NOTAUTH with the TSIG error (RFC 8945
	// §5.2), for logs and counts.
	Refused(req *dns.Msg, from netip.Addr, err error)
}

// SetTransfers makes the handler pass zone transfers and NOTIFYs to x
// (set before serving; nil: none).
func (h *Handler) SetTransfers(x Transfers) { h.xfr = x }

// A transfer out waits at most transferIdleOut for the secondary to take
// each message, and transferMaxOut for the whole (BIND's
// max-transfer-idle-out and max-transfer-time-out are 60 and 120
// minutes): a large zone to a slow but steady secondary goes through, a
// secondary that stops reading is dropped. Variables for tests.
var (
	transferIdleOut = 30 * time.Second
	transferMaxOut  = 120 * time.Minute
)

// deadlineConn sets the write deadline before each write: the idle
// timeout from now, never past end.
type deadlineConn struct {
	net.Conn
	idle time.Duration
	end  time.Time
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	d := time.Now().Add(c.idle)
	if d.After(c.end) {
		d = c.end
	}
	c.Conn.SetWriteDeadline(d)
	return c.Conn.Write(b)
}

// transfer answers the AXFR or IXFR request req received from the address
// from on the TCP connection c through the transfer service, over a writer that verifies
// req's TSIG and signs every message with its key (RFC 8945 §5.3.1).
func (h *Handler) transfer(c net.Conn, req []byte, from netip.Addr) error {
	dc := &deadlineConn{Conn: c, idle: transferIdleOut, end: time.Now().Add(transferMaxOut)}
	w, m, err := tsig.NewConnWriter(dc, req, h.snap.Load().Keyring)
	if err != nil {
		return err
	}
	defer c.SetWriteDeadline(time.Time{})
	return h.xfr.Transfer(w, m, from)
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
