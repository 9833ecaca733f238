package dnsserver

import (
	"encoding/hex"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/tsig"
)

// This file answers requests that carry a TSIG record (RFC 8945) the way
// CoreDNS's tsig plugin wraps the next handler: the TSIG is verified with
// the snapshot's keys, stripped, the rest answered as any request is, and
// the reply signed with the request's key. NOTIFYs and IXFRs over UDP go
// to the transfer service in between (Transfers.Answer). Every answer,
// signed or not, and the NOTAUTH of a TSIG that did not verify, passes
// the guard: rate limiting, cookies and the size cap apply to them as to
// every other query.

// signed answers req, which q says ends with a TSIG record: NOTAUTH with
// the TSIG error, unsigned, when it does not verify (RFC 8945 §5.2) —
// BADKEY for a known key under another algorithm than its own;
// otherwise the answer to req without it, signed with its key (§5.3).
func (h *Handler) signed(q *query, req []byte, t Transport, from netip.Addr, buf []byte, trace Trace, st *stats) []byte {
	m := new(dns.Msg)
	if m.Unpack(req) != nil || m.IsTsig() == nil {
		return h.formErr(q, buf)
	}
	rr := m.IsTsig()
	keys := h.snap.Load().Keyring
	// On a copy: TsigVerify lowers ARCOUNT in the buffer it checks.
	err := dns.TsigVerifyWithProvider(slices.Clone(req), keys, "", false)
	if err != nil {
		if h.xfr != nil {
			h.xfr.Refused(m, from, err)
		}
		return h.guardReply(q, tsig.ErrorReply(m, err), len(req), t, from, buf, st)
	}
	m.Extra = m.Extra[:len(m.Extra)-1]
	var out []byte
	if reply := h.transferAnswer(q, m, dns.CanonicalName(rr.Hdr.Name), t, from); reply != nil {
		out = h.guardReply(q, reply, len(req), t, from, buf, st)
	} else {
		plain, err := m.Pack()
		if err != nil {
			return h.formErr(q, buf)
		}
		out = h.handle(plain, t, from, buf, trace, st)
	}
	if out == nil {
		return nil // rate limited away
	}
	return sign(out, rr, keys, h.replyLimit(q, t, from))
}

// replyLimit is the most an answer to q may hold over t: over UDP the
// client's size and the cap on answers without a valid server cookie, as
// the guard sets them for every answer (udpLimit).
func (h *Handler) replyLimit(q *query, t Transport, from netip.Addr) int {
	if t != UDP {
		return maxTCPSize
	}
	var gd guarded
	var at int64
	h.startGuard(&gd, q.cookie, t, from, &at)
	var size uint16
	if q.opt != nil {
		size = q.opt.UDPSize()
	}
	return gd.udpLimit(q.opt != nil, size)
}

// unsignedTransfer answers an unsigned NOTIFY or IXFR over UDP through the
// transfer service; false leaves req to the handler's own answer.
func (h *Handler) unsignedTransfer(q *query, req []byte, t Transport, from netip.Addr, buf []byte, st *stats) ([]byte, bool) {
	m := new(dns.Msg)
	if m.Unpack(req) != nil {
		return nil, false
	}
	reply := h.transferAnswer(q, m, "", t, from)
	if reply == nil {
		return nil, false
	}
	return h.guardReply(q, reply, len(req), t, from, buf, st), true
}

// transferAnswer is the transfer service's answer to m, a NOTIFY or an
// IXFR over UDP (nil for anything else, or without a service).
func (h *Handler) transferAnswer(q *query, m *dns.Msg, key string, t Transport, from netip.Addr) *dns.Msg {
	if h.xfr == nil {
		return nil
	}
	ixfr := q.opcode == dns.OpcodeQuery && t == UDP && q.qtype == dns.TypeIXFR && q.qclass == dns.ClassINET
	if q.opcode != dns.OpcodeNotify && !ixfr {
		return nil
	}
	return h.xfr.Answer(m, from, key)
}

// guardReply sends resp, an answer to q the handler did not build on
// its general path (a TSIG error, the transfer service's answer), through
// the guard as that path sends its own: the cookie checked (a malformed
// one is FORMERR), an OPT with the server cookie when q had EDNS, the
// rate limiter's verdict, and over UDP the client's size and the cap on
// answers without a valid server cookie. reqLen is the request's size.
func (h *Handler) guardReply(q *query, resp *dns.Msg, reqLen int, t Transport, from netip.Addr, buf []byte, st *stats) []byte {
	var gd guarded
	h.startGuard(&gd, q.cookie, t, from, st.at())
	st.cookie, st.guarded, st.reqLen, st.qtype = gd.ck.Status, true, reqLen, q.qtype
	if gd.ck.Status == cookie.Malformed {
		return h.formErr(q, buf) // RFC 7873 §5.2.2
	}
	var opt *dns.OPT
	limit := maxTCPSize
	if q.opt != nil {
		opt = responseOPT(q.opt)
		if c := gd.reply(); len(c) > 0 {
			opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(c)})
		}
	}
	if t == UDP {
		var size uint16
		if q.opt != nil {
			size = q.opt.UDPSize()
		}
		limit = gd.udpLimit(q.opt != nil, size)
	}
	class := rrl.Classify(resp.Rcode, len(resp.Answer) > 0, false)
	switch gd.limit(t, from, class, lower(q.qname), q.qtype, netip.Addr{}, 0, st) {
	case rrl.Drop:
		return nil
	case rrl.Slip:
		slipMsg(resp, gd.clientCookie())
	}
	if opt != nil {
		// Before a TSIG record, which comes last (RFC 8945 §5.1).
		if n := len(resp.Extra); n > 0 && resp.Extra[n-1].Header().Rrtype == dns.TypeTSIG {
			resp.Extra = append(append(resp.Extra[:n-1:n-1], opt), resp.Extra[n-1])
		} else {
			resp.Extra = append(resp.Extra, opt)
		}
	}
	return q.patch(fit(resp, buf, limit, opt))
}

// sign signs out, the packed answer to the request whose TSIG record is
// t, with t's key over t's MAC (RFC 8945 §5.3); out as it is when it
// cannot. An answer that fits limit only without its TSIG record is sent
// as §5.3 says: the question, the OPT and the TSIG, with TC set, so the
// client asks again over TCP.
func sign(out []byte, t *dns.TSIG, keys tsig.Keyring, limit int) []byte {
	m := new(dns.Msg)
	if m.Unpack(out) != nil {
		return out
	}
	m.Compress = true
	gen := func() []byte {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
		signed, _, err := dns.TsigGenerateWithProvider(m, keys, t.MAC, false) // takes the TSIG record off m again
		if err != nil {
			return nil
		}
		return signed
	}
	signed := gen()
	if signed == nil {
		return out
	}
	if len(signed) > limit {
		m.Truncated = true
		m.Answer, m.Ns = nil, nil
		var opt []dns.RR
		if o := m.IsEdns0(); o != nil {
			opt = []dns.RR{o}
		}
		m.Extra = opt
		if s := gen(); s != nil {
			signed = s
		}
	}
	return signed
}
