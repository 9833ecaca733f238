package dnsserver

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/cookie"
	"github.com/steer-dns/steer/internal/ecs"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/presign"
	"github.com/steer-dns/steer/internal/querylog"
	"github.com/steer-dns/steer/internal/rrl"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/zone"
)

// Transport says how a query arrived; it decides the response size limit
// and labels the query's metrics, whose package defines it.
type Transport = metrics.Transport

// The transports a query can arrive on.
const (
	UDP = metrics.UDP
	TCP = metrics.TCP
)

// Sizes from RFC 6891 and the DNS Flag Day 2020 recommendation.
const (
	// AdvertisedUDPSize is the UDP payload size steer advertises and the most
	// it sends over UDP, a size that avoids IP fragmentation.
	AdvertisedUDPSize = 1232
	// MinUDPSize is the floor for a client's advertised size (RFC 6891 §6.2.5).
	MinUDPSize = 512
	maxTCPSize = dns.MaxMsgSize
)

const headerLen = 12

// Handler turns one query packet into one response packet. It reads the
// current snapshot through an atomic pointer: a reload swaps the pointer and
// queries in flight finish on the snapshot they started with.
type Handler struct {
	snap     atomic.Pointer[snapshot.Snapshot]
	metrics  *metrics.Metrics
	querylog atomic.Pointer[querylog.Log] // nil: off
	guard    atomic.Pointer[Guard]        // nil: no cookies, no limits
	now      func() time.Time             // the clock cookies read (tests); nil: the batch's time or time.Now
	xfr      Transfers                    // nil: transfers refused, NOTIFY not implemented
}

// SetQueryLog makes the handler log a sample of queries to l (nil: none);
// it may be called while serving. A sampled query is answered through the general path with a
// trace, so the logged rule and pools are the ones actually sent.
func (h *Handler) SetQueryLog(l *querylog.Log) { h.querylog.Store(l) }

// SetMetrics makes the handler count every query in m (set before serving).
func (h *Handler) SetMetrics(m *metrics.Metrics) { h.metrics = m }

// NewHandler returns a Handler serving snap.
func NewHandler(snap *snapshot.Snapshot) *Handler {
	h := &Handler{}
	h.snap.Store(snap)
	return h
}

// Swap installs a new snapshot for every query that starts after it.
func (h *Handler) Swap(snap *snapshot.Snapshot) { h.snap.Store(snap) }

// Snapshot returns the snapshot queries are answered from now.
func (h *Handler) Snapshot() *snapshot.Snapshot { return h.snap.Load() }

// query is what the handler needs from a parsed request.
type query struct {
	id      uint16
	opcode  int
	rd, cd  bool
	qname   string
	qtype   uint16
	qclass  uint16
	opt     *dns.OPT
	optBad  bool   // an OPT that breaks RFC 6891 (second OPT, wrong owner or section)
	ecs     []byte // the raw data of an EDNS Client Subnet option, if any
	cookie  []byte // the raw data of the first COOKIE option, if any
	raw     []byte // the question name's wire bytes as sent (nil if compressed)
	hasQ    bool   // the question was parsed
	tsig    bool   // the last record is a TSIG (RFC 8945)
	qdcount uint16
}

// HandleFrom answers req, received over t from the address from, writing
// the response into buf when it is large enough. It returns nil when the
// packet must be dropped: it is shorter than a header or is itself a
// response.
func (h *Handler) HandleFrom(req []byte, t Transport, from netip.Addr, buf []byte) []byte {
	if ql := h.querylog.Load(); ql.Sampled() {
		return h.logged(ql, req, t, from, buf)
	}
	var st stats
	out := h.handle(req, t, from, buf, nil, &st)
	h.count(t, out, &st)
	return out
}

// batch is what a UDP reader keeps over the datagrams of one recvmmsg:
// the time all of them are answered at (read once, by the first that
// needs it), and their counts, added to the shared counters once, after
// the batch (flush).
type batch struct {
	now   int64 // Unix nanoseconds, 0 until a query needs it (Handler.timeAt)
	tally metrics.Tally
	// exempt responses to sources rate limiting exempts, for rrl.
	rrl    *rrl.Limiter
	exempt uint64
	memo   nameMemo  // fast.go
	q      fastQuery // the fast path's parse of the datagram being answered
	// The last source rate limiting was asked to exempt in this batch,
	// and its answer: the datagrams of a batch mostly come from few
	// sources.
	exemptFrom netip.Addr
	exemptOK   bool
}

// start begins a batch, counting into m; its time is read when a query
// first needs it.
func (b *batch) start(m *metrics.Metrics) {
	b.now = 0
	b.tally.Bind(m)
}

// exempt says whether l exempts from (l.Exempt), asking l only for a
// source or limiter other than the last one asked in the batch, and
// counts the response when it does.
func (b *batch) exempts(l *rrl.Limiter, from netip.Addr) bool {
	if l != b.rrl {
		b.flushExempt()
		b.rrl, b.exemptFrom = l, netip.Addr{}
	}
	if from != b.exemptFrom {
		b.exemptFrom, b.exemptOK = from, l.Exempt(from)
	}
	if b.exemptOK {
		b.exempt++ // counted once per batch
	}
	return b.exemptOK
}

func (b *batch) flushExempt() {
	if b.exempt != 0 {
		b.rrl.CountExempt(b.exempt)
		b.exempt = 0
	}
}

// flush adds the batch's counts to the metrics and the rate limiter's.
//
// It lets go of what the batch pointed to: a reader that then waits idle
// keeps no replaced snapshot (its zones and policies) or limiter alive.
func (b *batch) flush() {
	b.tally.Flush()
	b.flushExempt()
	b.rrl, b.exemptFrom = nil, netip.Addr{}
	m := &b.memo
	m.snap, m.z, m.node, m.rec, m.n = nil, nil, nil, nil, 0
}

// handleBatched is HandleFrom for a datagram of the batch b.
func (h *Handler) handleBatched(req []byte, from netip.Addr, buf []byte, b *batch) []byte {
	if ql := h.querylog.Load(); ql.Sampled() {
		return h.logged(ql, req, UDP, from, buf)
	}
	st := stats{batch: b}
	out := h.handle(req, UDP, from, buf, nil, &st)
	if h.metrics != nil {
		countInto(&b.tally, UDP, out, &st)
	}
	return out
}

// stats is what the path that answered a query learnt of it, for metrics:
// nothing is parsed twice to count it.
type stats struct {
	fast  bool
	qtype uint16
	ecs   metrics.ECSKind
	hasEC bool // ecs is set: the question was read
	scope int  // the ECS scope returned, -1 for none
	v6    bool // the ECS option was IPv6
	// cookie is the query's cookie as the guard classified it (Absent
	// when it had none or cookies are off); guarded says the guard saw
	// the query, reqLen its size.
	cookie  cookie.Status
	guarded bool
	reqLen  int
	// report, set by Explain only, asks the guard to peek, not decide,
	// and to say what it found (a pointer: every query zeroes stats).
	report *GuardReport
	// now is the query's time in Unix nanoseconds, 0 until read
	// (Handler.timeAt).
	now int64
	// batch is the UDP reader's batch the query came in (nil: none).
	batch *batch
}

// at is where the query's time is kept: its batch's, else its own.
func (st *stats) at() *int64 {
	if st.batch != nil {
		return &st.batch.now
	}
	return &st.now
}

// noteECS records the query's client subnet class and, once known, the
// scope returned.
func (st *stats) noteECS(data []byte, s *ecs.Subnet, err error) {
	st.hasEC, st.scope = true, -1
	switch {
	case data == nil:
		st.ecs = metrics.ECSAbsent
	case err != nil:
		st.ecs = metrics.ECSInvalid
	default:
		st.ecs, st.v6 = metrics.ECSPresent, s.Family == ecs.FamilyIPv6
	}
}

// count adds one query to the metrics, when they are on.
func (h *Handler) count(t Transport, out []byte, st *stats) {
	if h.metrics != nil {
		countInto(h.metrics, t, out, st)
	}
}

// counter is where a query is counted: the metrics themselves, or a
// batch's tally of them.
type counter interface {
	Cookie(s uint8)
	NoCookieUDP(in, out int)
	Dropped(t metrics.Transport)
	Truncated()
	Query(t metrics.Transport, rcode int, qtype uint16, fast bool, size int)
	ECS(k metrics.ECSKind)
	Scope(v6 bool, scope int)
}

// countInto counts one query in c.
func countInto(c counter, t Transport, out []byte, st *stats) {
	mt := metrics.Transport(t)
	if st.guarded {
		c.Cookie(uint8(st.cookie))
		if t == UDP && st.cookie != cookie.Valid {
			c.NoCookieUDP(st.reqLen, len(out)) // 0 out when rate limited away
		}
	}
	if len(out) < headerLen {
		c.Dropped(mt)
		return
	}
	if out[2]&0x02 != 0 {
		c.Truncated()
	}
	c.Query(mt, int(out[3]&0x0F), st.qtype, st.fast, len(out))
	if st.hasEC {
		c.ECS(st.ecs)
		if st.scope >= 0 {
			c.Scope(st.v6, st.scope)
		}
	}
}

// logged answers a sampled query through the general path, recording the
// steering decision, and queues its log entry (never blocking).
func (h *Handler) logged(ql *querylog.Log, req []byte, t Transport, from netip.Addr, buf []byte) []byte {
	start := time.Now()
	e := querylog.Entry{Time: start, Client: from, Scope: -1, Transport: t.String()}
	var st stats
	out := h.handle(req, t, from, buf, func(_ *snapshot.Snapshot, r *policy.Record, _ *policy.Query, d *policy.Decision) {
		if d.Rule >= 0 && e.Rule == 0 {
			e.Rule = d.Rule + 1
			e.Pool = strings.Join(r.PoolNames(d.Pools), ",")
			switch d.Input {
			case policy.InputNodeAnycast:
				e.SteeredBy = "node-anycast-resolver"
			case policy.InputNodeUnplaced:
				e.SteeredBy = "node-unplaced-resolver"
			}
		}
	}, &st)
	e.Duration = time.Since(start)
	h.count(t, out, &st)
	if out == nil {
		return nil
	}
	var m dns.Msg
	if m.Unpack(out) == nil {
		if len(m.Question) > 0 {
			e.Name, e.Type = m.Question[0].Name, m.Question[0].Qtype
		}
		e.Rcode = m.Rcode
		for _, rr := range m.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				a, _ := netip.AddrFromSlice(rr.A.To4())
				e.Answers = append(e.Answers, a)
			case *dns.AAAA:
				a, _ := netip.AddrFromSlice(rr.AAAA)
				e.Answers = append(e.Answers, a)
			}
		}
		if opt := m.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if s, ok := o.(*dns.EDNS0_SUBNET); ok {
					if a, ok := netip.AddrFromSlice(s.Address); ok {
						if s.Family == 1 {
							a = a.Unmap()
						}
						e.ECS = netip.PrefixFrom(a, int(s.SourceNetmask))
					}
					e.Scope = int(s.SourceScope)
				}
			}
		}
	}
	ql.Write(&e)
	return out
}

// HandleGeneral answers req like HandleFrom but always through the general
// path, never the precompiled fast path: the reference the fast path is
// tested against, byte for byte.
func (h *Handler) HandleGeneral(req []byte, t Transport, from netip.Addr, buf []byte) []byte {
	return h.handle(req, t, from, buf, func(*snapshot.Snapshot, *policy.Record, *policy.Query, *policy.Decision) {}, new(stats))
}

// Trace receives every steering decision a query makes, with the snapshot
// it was made on (for explain).
type Trace func(snap *snapshot.Snapshot, r *policy.Record, q *policy.Query, d *policy.Decision)

// Explain answers req exactly as HandleFrom does over UDP, calling trace
// for each steering decision.
//
// It never debits the rate limiter: Guard reports what the limiter would
// do with this response now (Peek), and the answer returned is the one
// that would be sent if it passed.
func (h *Handler) Explain(req []byte, from netip.Addr, trace Trace) ([]byte, GuardReport) {
	st := &stats{report: new(GuardReport)}
	out := h.handle(req, UDP, from, make([]byte, 0, maxTCPSize), trace, st)
	return out, *st.report
}

// handle answers req through the fast path when it can (never with a
// trace, which only the general path records), else the general path; st
// receives what metrics need.
func (h *Handler) handle(req []byte, t Transport, from netip.Addr, buf []byte, trace Trace, st *stats) []byte {
	if len(req) < headerLen {
		return nil
	}
	if req[2]&0x80 != 0 { // QR: a response, never answer it (loops, reflection)
		return nil
	}
	if trace == nil {
		if out := h.fast(h.snap.Load(), req, t, from, buf[:0], st); out != nil {
			st.fast = true
			if len(out) == 0 {
				return nil // rate limited: dropped
			}
			return out
		}
	}
	return h.general(req, t, from, buf, trace, st)
}

// general answers req on the general path: miekg/dns packing, every
// record type, chains, truncation and malformed input. handle has checked
// the header length and the QR bit.
func (h *Handler) general(req []byte, t Transport, from netip.Addr, buf []byte, trace Trace, st *stats) []byte {
	var q query
	q.id = binary.BigEndian.Uint16(req[0:])
	q.opcode = int(req[2]>>3) & 0xF
	q.rd = req[2]&0x01 != 0
	q.cd = req[3]&0x10 != 0
	q.qdcount = binary.BigEndian.Uint16(req[4:])

	if q.opcode == dns.OpcodeNotify && h.xfr != nil {
		// A NOTIFY goes to the transfer service (tsig.go); one it cannot
		// read is NOTIMP, as below.
		nq := q
		if parse(req, &nq) == nil && !nq.optBad && nq.qdcount == 1 {
			if nq.tsig {
				return h.signed(&nq, req, t, from, buf, trace, st)
			}
			if out, ok := h.unsignedTransfer(&nq, req, t, from, buf, st); ok {
				return out
			}
		}
	}
	if q.opcode != dns.OpcodeQuery {
		// RFC 1035 §4.1.1: NOTIMP, echoing the ID and opcode; with an OPT
		// when the request had a well-formed one (RFC 6891 §7).
		if parse(req, &q) == nil && q.opt != nil && !q.optBad && q.qdcount <= 1 {
			resp := &dns.Msg{MsgHdr: dns.MsgHdr{Id: q.id, Response: true, Opcode: q.opcode, Rcode: dns.RcodeNotImplemented}}
			if q.hasQ {
				resp.Question = []dns.Question{{Name: lower(q.qname), Qtype: q.qtype, Qclass: q.qclass}}
			}
			resp.Extra = []dns.RR{responseOPT(q.opt)}
			if out := pack(resp, buf, MinUDPSize); out != nil {
				return q.patch(out)
			}
		}
		return headerOnly(buf, q.id, q.opcode, dns.RcodeNotImplemented)
	}
	if err := parse(req, &q); err != nil || q.optBad {
		return h.formErr(&q, buf)
	}
	if q.qdcount != 1 {
		return h.formErr(&q, buf)
	}
	if q.tsig {
		// Verified, stripped, answered as below and signed (tsig.go).
		return h.signed(&q, req, t, from, buf, trace, st)
	}
	if q.qtype == dns.TypeIXFR && t == UDP && h.xfr != nil {
		// RFC 1995 §2 allows IXFR over UDP; AXFR is TCP only (RFC 5936
		// §4.2), and TCP transfers never get here.
		if out, ok := h.unsignedTransfer(&q, req, t, from, buf, st); ok {
			return out
		}
	}

	snap := h.snap.Load()
	resp := new(dns.Msg)
	resp.Id = q.id
	resp.Response = true
	resp.Opcode = q.opcode
	resp.RecursionDesired = q.rd
	resp.CheckingDisabled = q.cd
	resp.Question = []dns.Question{{Name: lower(q.qname), Qtype: q.qtype, Qclass: q.qclass}}
	resp.Compress = true

	var opt *dns.OPT
	limit := maxTCPSize
	var gd guarded
	h.startGuard(&gd, q.cookie, t, from, st.at())
	st.cookie, st.guarded, st.reqLen = gd.ck.Status, true, len(req)
	cookieOpt := func() {
		if len(gd.reply()) > 0 {
			opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(gd.reply())})
		}
	}
	if q.opt != nil {
		opt = responseOPT(q.opt)
		if q.opt.Version() != 0 {
			// RFC 6891 §6.1.3: BADVERS, with an OPT of the version we speak
			// and, as BIND sends it, the cookie (genreport's edns1cookie).
			// The full 12-bit rcode stays in resp.Rcode: PackBuffer splits it
			// into the header and the OPT (and would reset an OPT's extended
			// rcode to the upper bits of resp.Rcode if it were only 0..15).
			resp.Rcode = dns.RcodeBadVers
			cookieOpt()
			resp.Extra = []dns.RR{opt}
			return q.patch(pack(resp, buf, limit))
		}
		h.options(snap, q.opt, opt, t)
	}
	if gd.ck.Status == cookie.Malformed {
		return h.formErr(&q, buf) // RFC 7873 §5.2.2
	}
	cookieOpt()
	var subnet ecs.Subnet
	hasECS := false
	st.qtype = q.qtype
	if q.ecs != nil && snap.ECS {
		var err error
		subnet, err = ecs.Parse(q.ecs, snap.MaxSourceV4, snap.MaxSourceV6)
		st.noteECS(q.ecs, &subnet, err)
		if err != nil {
			return h.formErr(&q, buf)
		}
		hasECS = true
	} else {
		st.noteECS(nil, nil, nil)
	}
	if t == UDP {
		var size uint16
		if q.opt != nil {
			size = q.opt.UDPSize()
		}
		limit = gd.udpLimit(q.opt != nil, size)
	}

	scope := -1
	var ede *dns.EDNS0_EDE      // an Extended DNS Error (RFC 8914) for the OPT
	needTC := false             // a signature the budget refused: TC=1
	limitName := lower(q.qname) // what rate limiting keys the response on
	referral := false
	nxname := false // a compact denial of a name that does not exist
	switch q.qclass {
	case dns.ClassINET:
		switch q.qtype {
		case dns.TypeAXFR, dns.TypeIXFR:
			resp.Rcode = dns.RcodeRefused                                   // no transfers configured, or not allowed
			ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited} // as NSD says it
		case dns.TypeOPT:
			resp.Rcode = dns.RcodeFormatError
		case dns.TypeNXNAME:
			// RFC 9824 §3.5: NXNAME is a meta-type of compact answers'
			// bitmaps only; a query for it is a format error.
			resp.Rcode = dns.RcodeFormatError
			ede = &dns.EDNS0_EDE{InfoCode: 30} // Invalid Query Type
		case dns.TypeTSIG, dns.TypeTKEY, dns.TypeMAILA, dns.TypeMAILB:
			resp.Rcode = dns.RcodeNotImplemented
		default:
			var a zone.Answer
			var lo *zone.LookupOptions
			if q.opt != nil && q.opt.Do() {
				// RFC 4035 §3.1: RRSIGs and denial for a DO query (a
				// signed zone's); CO asks for NXDOMAIN kept (RFC 9824).
				lo = &zone.LookupOptions{DO: true, CO: q.opt.Co(), Signing: h.signing(snap, t)}
			}
			if snap.Policies != nil {
				st := policy.Steerer{Live: snap.Live, Query: steerQuery(&subnet, hasECS, from), Now: h.timeAt(st.at()).Unix()}
				if trace != nil {
					st.Trace = func(r *policy.Record, q *policy.Query, d *policy.Decision) { trace(snap, r, q, d) }
				}
				snap.Zones.LookupWith(&a, q.qname, q.qtype, &st, lo)
			} else {
				snap.Zones.LookupWith(&a, q.qname, q.qtype, nil, lo)
			}
			if a.NeedSignature && t == UDP {
				// Over the signing budget: only a client that comes back
				// over TCP costs a signature (a spoofed flood cannot).
				needTC = true
			}
			scope = a.Scope
			ede = extendedError(&a)
			referral = a.Referral
			nxname = a.NXName
			switch {
			case (a.Rcode == dns.RcodeNameError || a.NXName) && a.Zone != nil:
				limitName = a.Zone.Origin // NXDOMAIN per zone (a compact one too)
			case a.Wildcard != "":
				limitName = a.Wildcard
			}
			resp.Rcode = a.Rcode
			resp.Authoritative = a.Authoritative
			resp.Answer, resp.Ns, resp.Extra = a.Answer, a.Ns, a.Extra
		}
	case dns.ClassCHAOS:
		chaos(snap, &q, resp)
		if resp.Rcode == dns.RcodeRefused {
			ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNotSupported} // as NSD says it
		}
	default:
		resp.Rcode = dns.RcodeRefused
		ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNotSupported}
	}
	var ecsAddr netip.Addr
	optScope := 0
	if hasECS {
		// RFC 7871 §7.2.1: echo the option with the scope of the answer.
		st.scope = subnet.Scope(scope)
		opt.Option = append(opt.Option, subnet.Option(st.scope))
		ecsAddr, optScope = subnet.Addr, st.scope
	}
	if needTC {
		resp.Truncated = true
		resp.Answer, resp.Ns, resp.Extra = nil, nil, nil
	}
	limitRcode := resp.Rcode
	if nxname {
		limitRcode = dns.RcodeNameError // RFC 9824's NOERROR is an NXDOMAIN to the limiter
	}
	switch v := gd.limit(t, from, rrl.Classify(limitRcode, len(resp.Answer) > 0, referral), limitName, q.qtype, ecsAddr, optScope, st); v {
	case rrl.Drop:
		return nil
	case rrl.Slip:
		slipMsg(resp, gd.clientCookie())
		ede = nil
	}
	if opt != nil {
		if ede != nil {
			opt.Option = append(opt.Option, ede)
		}
		// An extended rcode (> 15) stays whole in resp.Rcode: PackBuffer
		// writes its upper bits into the OPT.
		resp.Extra = append(resp.Extra, opt)
	}
	return q.patch(fit(resp, buf, limit, opt))
}

// extendedError returns the Extended DNS Error (RFC 8914) an answer from
// the zones carries when the query has EDNS, or nil: 20 (Not
// Authoritative) for a name outside every zone served, as Knot and NSD
// send with REFUSED, and 0 (Other) with a reason for the YXDOMAIN of a
// DNAME substitution that would make a name too long, as NSD does (the
// registry has no closer code). Neither is answered by the fast path.
func extendedError(a *zone.Answer) *dns.EDNS0_EDE {
	switch {
	case a.Rcode == dns.RcodeRefused && a.Zone == nil:
		return &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNotAuthoritative}
	case a.Rcode == dns.RcodeYXDomain:
		return &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: "DNAME substitution too long"}
	}
	return nil
}

// parse reads the header counts, the question and the OPT record of req
// using miekg/dns's record decoder, and rejects what RFC 1035 and RFC 6891
// call malformed, including bytes after the last record.
func parse(req []byte, q *query) error {
	an := binary.BigEndian.Uint16(req[6:])
	ns := binary.BigEndian.Uint16(req[8:])
	ar := binary.BigEndian.Uint16(req[10:])
	off := headerLen
	if q.qdcount >= 1 {
		name, off1, err := dns.UnpackDomainName(req, off)
		if err != nil {
			return err
		}
		if off1+4 > len(req) {
			return dns.ErrBuf
		}
		q.qname = name
		if n := plainNameLen(req, headerLen); n > 0 && headerLen+n == off1 {
			q.raw = req[headerLen:off1] // no compression pointer: the name as sent
		}
		q.qtype = binary.BigEndian.Uint16(req[off1:])
		q.qclass = binary.BigEndian.Uint16(req[off1+2:])
		q.hasQ = true
		off = off1 + 4
		for i := 1; i < int(q.qdcount); i++ {
			_, off1, err := dns.UnpackDomainName(req, off)
			if err != nil || off1+4 > len(req) {
				return dns.ErrBuf
			}
			off = off1 + 4
		}
	}
	total := int(an) + int(ns) + int(ar)
	for i := 0; i < total; i++ {
		if off >= len(req) {
			// UnpackRR returns an empty record and no error at the end of
			// the message, so counts above the records sent would pass
			// (and ANCOUNT 65535 would cost 65535 allocations).
			return dns.ErrBuf
		}
		var rr dns.RR
		if req[off] == 0 && off+11 <= len(req) && binary.BigEndian.Uint16(req[off+1:]) == dns.TypeOPT {
			// An OPT with the root owner is read here rather than by
			// miekg/dns, whose option decoders reject some options (an
			// unknown ECS family, say) that must be ignored when the
			// option is not in use. Only the framing is checked.
			o, end, err := parseOPT(req, off, q)
			if err != nil {
				return err
			}
			rr, off = o, end
		} else {
			r, off1, err := dns.UnpackRR(req, off)
			if err != nil {
				return err
			}
			rr, off = r, off1
		}
		if rr == nil {
			return dns.ErrRdata
		}
		if rr.Header().Rrtype == dns.TypeTSIG && i == total-1 && i >= int(an)+int(ns) {
			q.tsig = true
		}
		if o, ok := rr.(*dns.OPT); ok {
			if i < int(an)+int(ns) || o.Hdr.Name != "." || q.opt != nil {
				q.optBad = true
			}
			if q.opt == nil {
				q.opt = o
			}
		}
	}
	if off != len(req) {
		return errTrailing
	}
	return nil
}

// responseOPT starts the response's OPT: our UDP size, version 0, the DO
// bit echoed (RFC 3225), the CO bit too (RFC 9824 §5: a server that gives
// compact answers and keeps NXDOMAIN for CO says so; a resolver may take
// an NXDOMAIN with NXNAME as such only with CO in the response), and no
// other flag (unknown flags are not echoed).
func responseOPT(req *dns.OPT) *dns.OPT {
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(AdvertisedUDPSize)
	if req.Do() {
		o.SetDo()
	}
	if req.Co() {
		o.SetCo()
	}
	return o
}

// signing is what a DO query's lookup signs with: the snapshot's
// pre-signed steered answers and the node's budget, unlimited over TCP.
func (h *Handler) signing(snap *snapshot.Snapshot, t Transport) zone.Signing {
	q := &presign.Query{T: snap.Presigned, TCP: t == TCP, Now: h.clock().UnixNano()}
	if snap.Signing != nil {
		q.Budget, q.Cache = snap.Signing.Budget, snap.Signing.Cache
	}
	return q
}

// options answers the EDNS options steer understands; others are ignored.
func (h *Handler) options(snap *snapshot.Snapshot, req, resp *dns.OPT, t Transport) {
	for _, o := range req.Option {
		switch o.(type) {
		case *dns.EDNS0_NSID:
			if snap.Identity != "" {
				resp.Option = append(resp.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: hex.EncodeToString([]byte(snap.Identity))})
			}
		case *dns.EDNS0_TCP_KEEPALIVE:
			// RFC 7828: over TCP, tell the client how long we keep the connection.
			if t == TCP {
				resp.Option = append(resp.Option, &dns.EDNS0_TCP_KEEPALIVE{
					Code:    dns.EDNS0TCPKEEPALIVE,
					Timeout: uint16(min(snap.TCPIdleTimeout.Milliseconds()/100, 0xFFFF)),
				})
			}
		}
	}
}

// chaos answers the CHAOS-class server identification queries.
func chaos(snap *snapshot.Snapshot, q *query, resp *dns.Msg) {
	var text string
	switch strings.ToLower(q.qname) {
	case "id.server.", "hostname.bind.":
		text = snap.Identity
	case "version.bind.", "version.server.":
		text = snap.Version
	}
	if text == "" || (q.qtype != dns.TypeTXT && q.qtype != dns.TypeANY) {
		resp.Rcode = dns.RcodeRefused
		return
	}
	resp.Authoritative = true
	resp.Answer = []dns.RR{&dns.TXT{
		Hdr: dns.RR_Header{Name: q.qname, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS, Ttl: 0},
		Txt: []string{text},
	}}
}

// formErr answers a malformed query with FORMERR, echoing the question when
// it could be read.
func (h *Handler) formErr(q *query, buf []byte) []byte {
	resp := new(dns.Msg)
	resp.Id = q.id
	resp.Response = true
	resp.Opcode = q.opcode
	resp.RecursionDesired = q.rd
	resp.CheckingDisabled = q.cd
	resp.Rcode = dns.RcodeFormatError
	if q.hasQ && q.qdcount == 1 {
		resp.Question = []dns.Question{{Name: lower(q.qname), Qtype: q.qtype, Qclass: q.qclass}}
	}
	if q.opt != nil && !q.optBad {
		resp.Extra = []dns.RR{responseOPT(q.opt)}
	}
	out := q.patch(pack(resp, buf, maxTCPSize))
	if out == nil {
		return headerOnly(buf, q.id, q.opcode, dns.RcodeFormatError)
	}
	return out
}

// headerOnly builds a 12-byte response with only ID, QR, opcode and rcode.
func headerOnly(buf []byte, id uint16, opcode, rcode int) []byte {
	if cap(buf) < headerLen {
		buf = make([]byte, headerLen)
	}
	b := buf[:headerLen]
	clear(b)
	binary.BigEndian.PutUint16(b[0:], id)
	b[2] = 0x80 | byte(opcode&0xF)<<3
	b[3] = byte(rcode & 0xF)
	return b
}

func pack(m *dns.Msg, buf []byte, limit int) []byte {
	out, err := m.PackBuffer(buf[:cap(buf)])
	if err != nil || len(out) > limit {
		return nil
	}
	return out
}

// fit packs resp within limit bytes. When it does not fit only because of
// the additional section, that section is optional (RFC 1035 §4.1, RFC
// 2181 §9): answer and authority are kept, and as Knot does, additional
// RRsets are added whole, in order, while they fit, with no TC. When
// answer and authority do not fit, or a referral's glue does not (RFC
// 9471), it sends TC=1 with empty sections so the client retries over
// TCP: RRsets are never cut in half (RFC 2181 §9). The OPT is always kept.
func fit(resp *dns.Msg, buf []byte, limit int, opt *dns.OPT) []byte {
	out, err := resp.PackBuffer(buf[:cap(buf)])
	if err == nil && len(out) <= limit {
		return out
	}
	var keep []dns.RR
	if opt != nil {
		keep = []dns.RR{opt}
	}
	optional := make([]dns.RR, 0, len(resp.Extra))
	for _, rr := range resp.Extra {
		if o, ok := rr.(*dns.OPT); !ok || o != opt {
			optional = append(optional, rr)
		}
	}
	glue := len(resp.Answer) == 0 && len(resp.Ns) > 0 && len(optional) > 0
	if len(optional) > 0 && !glue {
		extra := make([]dns.RR, 0, len(resp.Extra))
		pack := func(n int) ([]byte, bool) {
			resp.Extra = append(append(extra[:0], optional[:n]...), keep...)
			out, err := resp.PackBuffer(buf[:cap(buf)])
			return out, err == nil && len(out) <= limit
		}
		if _, ok := pack(0); ok {
			n := 0 // the additional records that fit, whole RRsets
			for end := rrsetEnd(optional, 0); end > n; end = rrsetEnd(optional, end) {
				if _, ok := pack(end); !ok {
					break
				}
				n = end
			}
			out, _ = pack(n) // buf holds the last attempt: pack the one kept
			return out
		}
	}
	resp.Truncated = true
	resp.Answer, resp.Ns, resp.Extra = nil, nil, keep
	out, err = resp.PackBuffer(buf[:cap(buf)])
	if err != nil {
		return nil
	}
	return out
}

// rrsetEnd returns the end of the RRset that starts at rrs[i]: the records
// from i on with its owner, type and class (the zone lists an RRset's
// records together); len(rrs) when i is.
func rrsetEnd(rrs []dns.RR, i int) int {
	if i >= len(rrs) {
		return len(rrs)
	}
	h := rrs[i].Header()
	j := i + 1
	for ; j < len(rrs); j++ {
		g := rrs[j].Header()
		if g.Rrtype != h.Rrtype || g.Class != h.Class || !strings.EqualFold(g.Name, h.Name) {
			break
		}
	}
	return j
}

// parseOPT reads the OPT record with a root owner at req[off:]: its fixed
// fields, and of its options only those steer acts on (NSID, TCP keepalive;
// ECS is kept raw in q.ecs for package ecs). Options must be framed exactly
// (RFC 6891 §6.1.2); their contents are not judged here.
func parseOPT(req []byte, off int, q *query) (*dns.OPT, int, error) {
	class := binary.BigEndian.Uint16(req[off+3:])
	ttl := binary.BigEndian.Uint32(req[off+5:])
	rdlen := int(binary.BigEndian.Uint16(req[off+9:]))
	start := off + 11
	end := start + rdlen
	if end > len(req) {
		return nil, 0, dns.ErrBuf
	}
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: class, Ttl: ttl, Rdlength: uint16(rdlen)}}
	rdata := req[start:end]
	first := q.opt == nil
	for len(rdata) > 0 {
		if len(rdata) < 4 {
			return nil, 0, dns.ErrBuf
		}
		code := binary.BigEndian.Uint16(rdata)
		n := int(binary.BigEndian.Uint16(rdata[2:]))
		if 4+n > len(rdata) {
			return nil, 0, dns.ErrBuf
		}
		data := rdata[4 : 4+n : 4+n]
		switch code {
		case dns.EDNS0NSID:
			o.Option = append(o.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
		case dns.EDNS0TCPKEEPALIVE:
			o.Option = append(o.Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
		case dns.EDNS0SUBNET:
			if first && q.ecs == nil {
				q.ecs = data
			}
		case dns.EDNS0COOKIE:
			if first && q.cookie == nil {
				q.cookie = data
			}
		}
		rdata = rdata[4+n:]
	}
	return o, end, nil
}

// plainNameLen returns the wire length of the name at msg[off:] when it is
// written without compression pointers, and -1 otherwise.
func plainNameLen(msg []byte, off int) int {
	for i := off; i < len(msg); {
		l := int(msg[i])
		switch {
		case l == 0:
			return i + 1 - off
		case l&0xC0 != 0:
			return -1
		}
		i += 1 + l
	}
	return -1
}

// lower returns name in lower case (ASCII only, as DNS compares names).
func lower(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// patch puts the question name back as the client sent it. Responses are
// packed with the name in lower case, so compression (which miekg/dns does
// case-sensitively) points every later occurrence of the name into the
// question whatever case the query used; the bytes, and so the answer, are
// then the same for every case variant, and the precompiled fast path can
// produce them exactly.
func (q *query) patch(out []byte) []byte {
	if out == nil || q.raw == nil || len(out) < headerLen+len(q.raw) || binary.BigEndian.Uint16(out[4:]) == 0 {
		return out
	}
	copy(out[headerLen:], q.raw)
	return out
}

var errTrailing = errors.New("dnsserver: bytes after the last record")
