// Package xfr owns zone transfers, out and in, and the NOTIFYs that
// announce them. The protocol parts:
//
//   - AXFR out (RFC 5936): turning a zone's records into response messages
//     that each fit a TCP DNS message, TSIG-signing every one of them
//     (RFC 8945), and writing them on the connection (Messages, Serve);
//   - IXFR out (RFC 1995): the difference between two versions of a zone
//     (Diff), a journal of the last deltas (Journal), the answer for a
//     client's serial in its incremental, AXFR-style or up-to-date form
//     (IXFR) and serving it over TCP or UDP (ServeIXFR);
//   - NOTIFY out (RFC 1996): one signed NOTIFY with retries (Notify) and a
//     background sender that coalesces them per secondary (Notifier).
//
// The service (Service, in service.go and export.go) runs them for a
// server, as CoreDNS's transfer plugin keeps zone data apart from the
// protocol: it takes the zones served as plain data (Zone: serials,
// records, fallbacks, secondaries and their keys), decides the serial each
// export goes out under (kept in SerialsFile across restarts; in a fleet
// agreed with the other nodes through an Agreement), journals the changes
// (a fallback change as the fallbacks' delta alone), streams AXFR from the
// zone served without copying it, enforces who may transfer (address and key), notifies the
// secondaries, keeps the secondary zones transferred in (package
// secondary) and answers NOTIFYs from their primaries, and owns the
// transfer metrics (metrics.go). It never sees the snapshot or the DNS
// server: the server verifies and signs TSIG (dnsserver's tsig.go, and
// tsig.NewConnWriter for a transfer's messages) and hands it requests.
package xfr

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// DefaultLimit is the packed size a message is kept at or under when the
// caller gives no limit. The accounting is an upper bound (each record is
// counted uncompressed and the TSIG RR is counted with the largest MAC and
// a BADTIME other-data field), so no margin is needed for miscounting; the
// 1,535 bytes under the 65,535-byte TCP maximum are kept as room for
// anything a later change adds to a message (an OPT RR, a longer key
// name) without re-deriving the arithmetic. CoreDNS flushes at 63,000
// bytes for the same reason.
const DefaultLimit = 64000

// maxMAC is the largest TSIG MAC in bytes (hmac-sha512).
const maxMAC = 64

// ErrTooBig reports a record that does not fit a message on its own.
var ErrTooBig = errors.New("xfr: record too big for one message")

// Messages splits rrs — the zone's SOA, its other records, and the SOA
// again; or an IXFR answer, which also starts and ends with the SOA, or is
// the current SOA alone — into response messages for req. Each message echoes req's
// ID and question (RFC 5936 §2.2.1 lets later messages omit the question;
// every one carries it, as BIND, Knot and NSD accept and miekg/dns's
// Transfer.In expects nothing else), has AA set and rcode NOERROR, and
// packs to at most limit bytes with compression, counting room for a TSIG
// RR when req is signed. limit ≤ 0 means DefaultLimit. The messages are
// not signed yet; Serve signs them as it writes.
func Messages(req *dns.Msg, rrs []dns.RR, limit int) ([]*dns.Msg, error) {
	if len(rrs) == 0 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		return nil, errors.New("xfr: records must start and end with the zone's SOA (or be the SOA alone)")
	}
	var out []*dns.Msg
	sp := newSplitter(req, limit, func(m *dns.Msg) error { out = append(out, m); return nil })
	for _, rr := range rrs {
		if err := sp.add(rr); err != nil {
			return nil, err
		}
	}
	sp.flush()
	return out, nil
}

// splitter fills response messages for req with records, as Messages
// splits them, handing each message to emit once it is full (and the
// last at flush): a transfer streams its records rather than holding
// them all.
type splitter struct {
	req             *dns.Msg
	limit, overhead int
	m               *dns.Msg
	size            int
	emit            func(*dns.Msg) error
}

func newSplitter(req *dns.Msg, limit int, emit func(*dns.Msg) error) *splitter {
	if limit <= 0 {
		limit = DefaultLimit
	}
	overhead := 12 // header
	for _, q := range req.Question {
		overhead += len(dns.Fqdn(q.Name)) + 1 + 4
	}
	if t := req.IsTsig(); t != nil {
		overhead += tsigRoom(t)
	}
	return &splitter{req: req, limit: limit, overhead: overhead, emit: emit}
}

// add puts rr in the message being filled, emitting that one first when
// rr does not fit.
func (sp *splitter) add(rr dns.RR) error {
	n := dns.Len(rr) // uncompressed: never less than what it packs to
	if sp.overhead+n > sp.limit {
		return fmt.Errorf("%w: %s %s is %d bytes, limit %d", ErrTooBig, rr.Header().Name, dns.TypeToString[rr.Header().Rrtype], n, sp.limit)
	}
	if sp.m != nil && sp.size+n > sp.limit {
		if err := sp.flush(); err != nil {
			return err
		}
	}
	if sp.m == nil {
		sp.m = reply(sp.req)
		sp.size = sp.overhead
	}
	sp.m.Answer = append(sp.m.Answer, rr)
	sp.size += n
	return nil
}

// flush emits the message being filled, if any.
func (sp *splitter) flush() error {
	m := sp.m
	sp.m = nil
	if m == nil {
		return nil
	}
	return sp.emit(m)
}

// tsigRoom is an upper bound on the packed size of the TSIG RR a response
// to a request signed with t carries.
func tsigRoom(t *dns.TSIG) int {
	r := &dns.TSIG{
		Hdr:       dns.RR_Header{Name: t.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm: t.Algorithm,
		MAC:       strings.Repeat("00", maxMAC),
		OtherData: strings.Repeat("00", 6),
	}
	return dns.Len(r)
}

func reply(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	m.Compress = true
	return m
}

// Serve answers the AXFR request req on w with rrs (SOA, the rest, SOA),
// in messages of at most DefaultLimit bytes. When req is signed, every
// message is signed with req's key: the first over the request MAC and
// the message, each later one over the previous MAC, the message and the
// timers only (RFC 8945 §5.3.1), which is what the server's
// ResponseWriter (and tsig.NewConnWriter's) does once TsigTimersOnly is set.
// The dns.Server must have the key in its TsigSecret (or TsigProvider),
// or tsig.NewConnWriter in its secrets, and must have verified the request: a signed request whose TSIG did not verify is answered
// NOTAUTH with the TSIG error (RFC 8945 §5.2) and nothing of the zone.
// A request over UDP is answered REFUSED (RFC 5936 §4.2).
func Serve(w dns.ResponseWriter, req *dns.Msg, rrs []dns.RR) error {
	if done, err := refuseAXFR(w, req); done {
		return err
	}
	return writeAll(w, req, rrs)
}

// refuseAXFR answers what must not get the zone: a request that is not an
// AXFR is an error, one over UDP gets REFUSED, one whose TSIG did not
// verify NOTAUTH. done is false when the zone may be sent.
func refuseAXFR(w dns.ResponseWriter, req *dns.Msg) (done bool, err error) {
	if len(req.Question) != 1 || req.Question[0].Qtype != dns.TypeAXFR {
		return true, errors.New("xfr: not an AXFR request")
	}
	if _, ok := w.RemoteAddr().(*net.TCPAddr); !ok {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeRefused)
		w.WriteMsg(m)
		return true, errors.New("xfr: AXFR over UDP refused")
	}
	if t := req.IsTsig(); t != nil && w.TsigStatus() != nil {
		return true, refuseTsig(w, req)
	}
	return false, nil
}

// ServeStream is Serve with the records streamed from each (the zone's
// SOA first, the SOA again last), each message written as soon as it is
// full.
func ServeStream(w dns.ResponseWriter, req *dns.Msg, each func(yield func(dns.RR) bool)) error {
	if done, err := refuseAXFR(w, req); done {
		return err
	}
	return writeStream(w, req, each)
}

// refuseTsig answers a signed request whose TSIG did not verify: NOTAUTH
// with the TSIG error and no MAC (RFC 8945 §5.2, §5.3.2).
func refuseTsig(w dns.ResponseWriter, req *dns.Msg) error {
	err := w.TsigStatus()
	w.WriteMsg(tsig.ErrorReply(req, err))
	return fmt.Errorf("xfr: request TSIG: %w", err)
}

// writeAll splits rrs into messages for req and writes them on w, each
// signed when req is.
func writeAll(w dns.ResponseWriter, req *dns.Msg, rrs []dns.RR) error {
	t := req.IsTsig()
	msgs, err := Messages(req, rrs, DefaultLimit)
	if err != nil {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		if t != nil {
			m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, 0)
		}
		w.WriteMsg(m)
		return err
	}
	for i, m := range msgs {
		if err := writeSigned(w, req, m); err != nil {
			return fmt.Errorf("xfr: message %d of %d: %w", i+1, len(msgs), err)
		}
	}
	return nil
}

// writeSigned writes m on w, signed when req is: the first message over
// the request MAC, each later one over the timers only (TsigTimersOnly).
func writeSigned(w dns.ResponseWriter, req, m *dns.Msg) error {
	if t := req.IsTsig(); t != nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, 0)
		// SetTsig leaves TimeSigned 0; miekg fills in the time as it signs.
	}
	if err := w.WriteMsg(m); err != nil {
		return err
	}
	w.TsigTimersOnly(true)
	return nil
}

// writeStream writes the records each yields (the zone's SOA first, the
// SOA again last) on w as writeAll writes a slice, each message as soon
// as it is full: the transfer holds one message, not the zone. A record
// too big for a message ends it with an error (the connection is
// closed: the messages before it are sent already).
func writeStream(w dns.ResponseWriter, req *dns.Msg, each func(yield func(dns.RR) bool)) error {
	sent := 0
	sp := newSplitter(req, DefaultLimit, func(m *dns.Msg) error {
		sent++
		if err := writeSigned(w, req, m); err != nil {
			return fmt.Errorf("xfr: message %d: %w", sent, err)
		}
		return nil
	})
	var err error
	first := true
	each(func(rr dns.RR) bool {
		if first && rr.Header().Rrtype != dns.TypeSOA {
			err = errors.New("xfr: records must start with the zone's SOA")
			return false
		}
		first = false
		err = sp.add(rr)
		return err == nil
	})
	if err == nil && first {
		err = errors.New("xfr: no records to transfer")
	}
	if err != nil {
		if sent == 0 {
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			signLike(m, req, w)
			w.WriteMsg(m)
		}
		return err
	}
	return sp.flush()
}
