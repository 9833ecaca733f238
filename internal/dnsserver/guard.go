package dnsserver

import (
	"net/netip"
	"strings"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/rrl"
)

// This file holds what keeps the server from being used as an amplifier
// of spoofed floods: DNS cookies, the size cap on answers to queries
// without a valid server cookie, and response rate limiting. Both paths
// call the same functions, so they decide alike; neither ever changes an
// answer's sections, only whether (and how whole) it is sent.

// Guard is the server's abuse protection. It is immutable; SetGuard
// replaces it whole (on a reload that changes it).
type Guard struct {
	// Cookies answers and verifies DNS cookies (RFC 7873, RFC 9018);
	// nil turns them off, and COOKIE options are then ignored.
	Cookies *cookie.Jar
	// MaxNoCookieUDP caps the size of a UDP answer to a query without a
	// valid server cookie: a larger one goes out with TC set and empty
	// sections, so the client asks again over TCP (or with its cookie).
	// 0 leaves only the usual limits (the client's size, 1232).
	MaxNoCookieUDP int
	// RRL rate-limits UDP responses to queries without a valid server
	// cookie (nil: off). It keeps its buckets across reloads when the
	// node hands the same limiter to the new guard.
	RRL *rrl.Limiter
}

// SetGuard installs g for every query that starts after it (nil: none).
func (h *Handler) SetGuard(g *Guard) { h.guard.Store(g) }

// Guard returns the guard in use (nil: none).
func (h *Handler) Guard() *Guard { return h.guard.Load() }

// clock is the time cookies are minted and checked, buckets filled and
// steered answers marked at, for a query that has no batch time.
func (h *Handler) clock() time.Time {
	var at int64
	return h.timeAt(&at)
}

// timeAt is the time a query is answered at: the test clock when one is
// set, else *at (0: not read yet, read now and kept for the rest of the
// query, or of its batch of datagrams). It is read only when something
// needs it (a cookie, a source rate limiting decides on, a steered
// answer), and at most once per recvmmsg for the whole batch: a
// 1 ms ticker keeping a coarse clock instead woke a thread 1,000 times a
// second, which cost an idle node 2 % of a core and a busy one as much
// per second as thousands of queries.
func (h *Handler) timeAt(at *int64) time.Time {
	if h.now != nil {
		return h.now()
	}
	if *at == 0 {
		*at = time.Now().UnixNano()
	}
	return time.Unix(0, *at)
}

// guarded is what the guard learnt of one query: the time it read (once),
// the cookie result and the reply's cookie option.
type guarded struct {
	g   *Guard
	now time.Time // zero until read (timeFrom)
	h   *Handler
	ck  cookie.Result
	// buf[:n] is the response's COOKIE option data (n 0: none). A
	// length, not a slice of buf, so that gd stays on the stack.
	buf [cookie.MintLen + cookie.MaxServerLen]byte
	n   int
}

// reply is the response's COOKIE option data, empty for none.
func (gd *guarded) reply() []byte { return gd.buf[:gd.n] }

// start loads the guard and classifies the query's COOKIE option (raw,
// nil when it has none); at is the query's time (timeAt).
func (h *Handler) startGuard(gd *guarded, raw []byte, t Transport, from netip.Addr, at *int64) {
	gd.g, gd.h = h.guard.Load(), h // h even without a guard: explain reads the time through gd
	if gd.g == nil {
		return
	}
	if raw != nil && gd.g.Cookies != nil {
		now := gd.timeFrom(at)
		gd.ck = gd.g.Cookies.Check(raw, from, now)
		gd.n = len(gd.g.Cookies.Reply(gd.buf[:0], raw, gd.ck, from, now))
	}
}

// timeFrom is the time cookies and the rate limiter see, the query's
// (at, as Handler.timeAt), read when first needed: a query without a
// cookie from a source rate limiting exempts reads no clock. (at is not
// kept in gd: a pointer stored through gd would move the query's stats
// to the heap.)
func (gd *guarded) timeFrom(at *int64) time.Time {
	if gd.now.IsZero() {
		gd.now = gd.h.timeAt(at)
	}
	return gd.now
}

// clientCookie reports whether the query had a client cookie cookies
// answer (so a slipped response can be BADCOOKIE).
func (gd *guarded) clientCookie() bool {
	return gd.ck.Status == cookie.ClientOnly || gd.ck.Status == cookie.Invalid
}

// udpLimit is the most a UDP answer may hold: the client's size within
// 512..1232 (512 without EDNS), and no more than the guard's cap for a
// query without a valid server cookie.
func (gd *guarded) udpLimit(hasOPT bool, size uint16) int {
	limit := MinUDPSize
	if hasOPT {
		limit = int(max(MinUDPSize, min(size, AdvertisedUDPSize)))
	}
	if gd.g != nil && gd.g.MaxNoCookieUDP > 0 && gd.ck.Status != cookie.Valid {
		limit = min(limit, gd.g.MaxNoCookieUDP)
	}
	return limit
}

// limit asks the rate limiter about a UDP response (TCP and valid server
// cookies are exempt). name is the lower-case name the response is keyed
// on; the ECS address and the scope the response carries complete the key.
//
// For explain (st.report set) it peeks instead, records what it found in
// st.report and passes: the explained answer is the one sent if it passes.
func (gd *guarded) limit(t Transport, from netip.Addr, class rrl.Class, name string, qtype uint16, ecsAddr netip.Addr, scope int, st *stats) rrl.Verdict {
	if st.report != nil {
		gd.timeFrom(st.at())
		// A copy: name may point into the fast path's stack.
		return gd.explain(t, from, class, strings.Clone(name), qtype, ecsAddr, scope, st.report)
	}
	if gd.g == nil || gd.g.RRL == nil || t != UDP || gd.ck.Status == cookie.Valid || !from.IsValid() {
		return rrl.Pass
	}
	if st.batch != nil && st.batch.exempts(gd.g.RRL, from) {
		return rrl.Pass
	}
	return gd.g.RRL.Decide(from, gd.response(class, name, qtype, ecsAddr, scope), gd.timeFrom(st.at()).UnixNano())
}

// response is what the limiter keys the response on.
func (gd *guarded) response(class rrl.Class, name string, qtype uint16, ecsAddr netip.Addr, scope int) rrl.Response {
	return rrl.Response{
		Class:  class,
		Name:   unsafe.Slice(unsafe.StringData(name), len(name)),
		Qtype:  qtype,
		ECS:    ecsAddr,
		Scope:  scope,
		Cookie: gd.clientCookie(),
	}
}

// GuardReport is what explain says of the abuse protection for one query.
type GuardReport struct {
	// Cookie is the query's cookie result (absent, client_only, ...).
	Cookie string `json:"cookie"`
	// RateLimit is "off", "exempt (...)" or the verdict the limiter would
	// give this response now: pass, slip, drop, log-slip, log-drop.
	RateLimit string `json:"rate_limit"`
	// Class and Key are what the response is counted as: its class and
	// the name, type and client block its bucket is keyed on.
	Class string `json:"rate_limit_class,omitempty"`
	Key   string `json:"rate_limit_key,omitempty"`
}

func (gd *guarded) explain(t Transport, from netip.Addr, class rrl.Class, name string, qtype uint16, ecsAddr netip.Addr, scope int, rep *GuardReport) rrl.Verdict {
	rep.Cookie = gd.ck.Status.String()
	switch {
	case gd.g == nil || gd.g.RRL == nil:
		rep.RateLimit = "off"
		return rrl.Pass
	case t != UDP:
		rep.RateLimit = "exempt (TCP)"
		return rrl.Pass
	case gd.ck.Status == cookie.Valid:
		rep.RateLimit = "exempt (valid server cookie)"
		return rrl.Pass
	case !from.IsValid():
		rep.RateLimit = "exempt (no source address)"
		return rrl.Pass
	case gd.g.RRL.Exempt(from):
		rep.RateLimit = "exempt (rrl.exempt)"
		return rrl.Pass
	}
	rep.Class = class.String()
	key := name + " " + dns.TypeToString[qtype]
	switch class {
	case rrl.Error:
		key = "(the source block only)"
	case rrl.NoData, rrl.NXDomain, rrl.Referral:
		key = name
	}
	if ecsAddr.IsValid() && scope > 0 && class != rrl.Error {
		key += ", client block " + netip.PrefixFrom(ecsAddr, min(scope, ecsAddr.BitLen())).Masked().String()
	}
	rep.Key = key
	rep.RateLimit = gd.g.RRL.Peek(from, gd.response(class, name, qtype, ecsAddr, scope), gd.now.UnixNano()).String()
	return rrl.Pass
}

// slipWire turns a packed response into its slipped form in place: the
// header and question, and the OPT record that starts at optStart (-1:
// none), with no other record; TC set, or the BADCOOKIE rcode (23) when
// badCookie. qend is where the question ends. It writes exactly what the
// general path packs for a slipped response.
func slipWire(out []byte, qend, optStart int, badCookie bool) []byte {
	n := 0
	if optStart >= 0 {
		n = copy(out[qend:], out[optStart:])
	}
	out = out[:qend+n]
	out[6], out[7], out[8], out[9], out[10], out[11] = 0, 0, 0, 0, 0, 0
	if optStart >= 0 {
		out[11] = 1
	}
	if badCookie {
		out[3] = out[3]&0xF0 | byte(dns.RcodeBadCookie&0x0F)
		out[qend+5] = byte(dns.RcodeBadCookie >> 4) // the OPT's extended rcode
	} else {
		out[2] |= 0x02
	}
	return out
}

// slipMsg makes resp its slipped form: no records (the OPT is added
// after), and TC or BADCOOKIE.
func slipMsg(resp *dns.Msg, badCookie bool) {
	resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
	if badCookie {
		resp.Rcode = dns.RcodeBadCookie
	} else {
		resp.Truncated = true
	}
}
