package secondary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// xferError is a failure with the Event result it counts as.
type xferError struct {
	result string // "refused", "tsig", "timeout", "error", "broken"
	rcode  int    // the primary's rcode, -1 if none
	msg    string
}

func (e *xferError) Error() string { return e.msg }

func newErr(result, format string, a ...any) *xferError {
	return &xferError{result: result, rcode: -1, msg: fmt.Sprintf(format, a...)}
}

// classify returns the Event result of err.
func classify(err error) string {
	var xe *xferError
	if errors.As(err, &xe) {
		return xe.result
	}
	if isTimeout(err) {
		return "timeout"
	}
	if isTSIG(err) {
		return "tsig"
	}
	return "error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func isTSIG(err error) bool {
	for _, e := range []error{dns.ErrSig, dns.ErrNoSig, dns.ErrAuth, dns.ErrTime, dns.ErrSecret, dns.ErrKeyAlg, dns.ErrKey} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// wrap turns a network or miekg error talking to primary into an
// xferError; midway says some of the transfer had arrived.
func wrap(err error, ctxErr error, primary string, midway bool) *xferError {
	var xe *xferError
	if errors.As(err, &xe) {
		return xe
	}
	msg := strings.TrimPrefix(err.Error(), "dns: ")
	switch {
	case isTSIG(err):
		return newErr("tsig", "TSIG: %s from %s", msg, primary)
	case errors.Is(ctxErr, context.DeadlineExceeded) || isTimeout(err):
		return newErr("timeout", "timeout waiting for %s", primary)
	}
	if rest, ok := strings.CutPrefix(msg, "bad xfr rcode: "); ok {
		if rc, err := strconv.Atoi(rest); err == nil {
			return rcodeErr(rc, primary)
		}
	}
	if errors.Is(err, dns.ErrSoa) {
		return newErr("broken", "malformed transfer from %s: no SOA first", primary)
	}
	if midway {
		return newErr("broken", "transfer from %s failed midway: %s", primary, msg)
	}
	return newErr("error", "%s: %s", primary, msg)
}

func rcodeErr(rc int, primary string) *xferError {
	name := dns.RcodeToString[rc]
	if name == "" {
		name = strconv.Itoa(rc)
	}
	e := &xferError{result: "error", rcode: rc, msg: fmt.Sprintf("%s answered %s", primary, name)}
	switch rc {
	case dns.RcodeRefused:
		e.result, e.msg = "refused", fmt.Sprintf("refused by %s", primary)
	case dns.RcodeNotAuth:
		e.result, e.msg = "tsig", fmt.Sprintf("TSIG: %s answered NOTAUTH (key not accepted)", primary)
	}
	return e
}

// keyring is the zone's key bound to its algorithm: an answer signed
// under another algorithm does not verify. nil without a key.
func keyring(key *tsig.Key) dns.TsigProvider {
	if key == nil {
		return nil
	}
	return tsig.NewKeyring(*key)
}

// dial connects to primary over network from source (any address when
// invalid), the connection closed when ctx ends.
func dial(ctx context.Context, network, primary string, source netip.Addr) (net.Conn, func() bool, error) {
	var d net.Dialer
	if source.IsValid() {
		if network == "udp" {
			d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(source, 0))
		} else {
			d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(source, 0))
		}
	}
	c, err := d.DialContext(ctx, network, primary)
	if err != nil {
		return nil, nil, err
	}
	return c, context.AfterFunc(ctx, func() { c.Close() }), nil
}

// querySOA asks primary for the zone's SOA (UDP, TCP on truncation) and
// returns its serial.
func (m *Manager) querySOA(ctx context.Context, cfg Zone, primary string) (uint32, error) {
	r, err := m.exchange(ctx, cfg, primary, "udp")
	if err == nil && r.Truncated {
		r, err = m.exchange(ctx, cfg, primary, "tcp")
	}
	if err != nil {
		return 0, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return 0, rcodeErr(r.Rcode, primary)
	}
	if !r.Authoritative {
		return 0, newErr("error", "%s is not authoritative for %s", primary, cfg.Origin)
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok && strings.EqualFold(soa.Hdr.Name, cfg.Origin) {
			return soa.Serial, nil
		}
	}
	return 0, newErr("error", "%s answered no SOA for %s", primary, cfg.Origin)
}

func (m *Manager) exchange(ctx context.Context, cfg Zone, primary, network string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(cfg.Origin, dns.TypeSOA)
	q.RecursionDesired = false
	if cfg.Key != nil {
		q.SetTsig(cfg.Key.Name, cfg.Key.Algorithm, 300, time.Now().Unix())
	}
	c, stop, err := dial(ctx, network, primary, m.limits().Source)
	if err != nil {
		return nil, wrap(err, ctx.Err(), primary, false)
	}
	defer stop()
	defer c.Close()
	cl := &dns.Client{Net: network, Timeout: m.o.Timeout, TsigProvider: keyring(cfg.Key)}
	r, _, err := cl.ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: c})
	if err != nil {
		if ts := tsigOf(r); errors.Is(err, dns.ErrAuth) && ts != nil && ts.Error != 0 {
			return nil, newErr("tsig", "TSIG: %s refused our signature: %s", primary, tsigRcode(ts.Error))
		}
		return nil, wrap(err, ctx.Err(), primary, false)
	}
	if cfg.Key != nil && r.IsTsig() == nil {
		// miekg/dns only verifies a TSIG that is there.
		return nil, newErr("tsig", "TSIG: unsigned answer from %s to a signed query", primary)
	}
	return r, nil
}

// transfer brings the zone in from primary: IXFR when there is a copy
// (cur, SOA first), AXFR when there is none or the IXFR cannot be used.
// It returns the new records, SOA first, or nil when an IXFR said the
// copy is current.
func (m *Manager) transfer(ctx context.Context, origin string, cfg Zone, primary string, cur []dns.RR) ([]dns.RR, string, error) {
	if cur != nil {
		start := time.Now()
		oldSerial := cur[0].(*dns.SOA).Serial
		resp, err := m.xfrIn(ctx, cfg, primary, dns.TypeIXFR, cur[0].(*dns.SOA))
		var rrs []dns.RR
		var full, uptodate bool
		if err == nil {
			rrs, full, uptodate, err = applyIXFR(origin, cur, resp)
			if err != nil {
				err = newErr("broken", "inconsistent IXFR from %s: %v", primary, err)
			}
		}
		if err == nil {
			if uptodate {
				m.event(origin, "ixfr", "uptodate")
				return nil, "ixfr", nil
			}
			m.log.Info("IXFR received", "zone", origin, "primary", primary, "full_zone", full,
				"serial", fmt.Sprintf("%d→%d", oldSerial, rrs[0].(*dns.SOA).Serial), "records", len(resp),
				"duration", time.Since(start).Round(time.Millisecond))
			return rrs, "ixfr", nil
		}
		res := classify(err)
		if res != "rejected" {
			m.event(origin, "ixfr", res)
		}
		var xe *xferError
		fallback := errors.As(err, &xe) && (xe.result == "broken" ||
			xe.rcode == dns.RcodeNotImplemented || xe.rcode == dns.RcodeRefused || xe.rcode == dns.RcodeFormatError)
		m.log.Warn("IXFR failed", "zone", origin, "primary", primary, "result", res, "error", err.Error(),
			"fallback_axfr", fallback && ctx.Err() == nil)
		if !fallback || ctx.Err() != nil {
			return nil, "ixfr", err
		}
	}
	start := time.Now()
	resp, err := m.xfrIn(ctx, cfg, primary, dns.TypeAXFR, nil)
	var rrs []dns.RR
	if err == nil {
		rrs, err = fullZone(origin, resp)
		if err != nil {
			err = newErr("broken", "malformed AXFR from %s: %v", primary, err)
		}
	}
	if err != nil {
		res := classify(err)
		m.event(origin, "axfr", res)
		m.log.Warn("AXFR failed", "zone", origin, "primary", primary, "result", res, "error", err.Error())
		return nil, "axfr", err
	}
	m.log.Info("AXFR received", "zone", origin, "primary", primary, "serial", rrs[0].(*dns.SOA).Serial,
		"records", len(rrs), "duration", time.Since(start).Round(time.Millisecond))
	return rrs, "axfr", nil
}

// xfrIn runs one AXFR or IXFR (with ours in the authority section) over
// TCP and returns every record of the answer sections. Any error — a
// closed connection, a TSIG failure on any message, no message for
// IdleTimeout, the whole taking longer than MaxTransferTime — fails it
// whole.
func (m *Manager) xfrIn(ctx context.Context, cfg Zone, primary string, qtype uint16, ours *dns.SOA) ([]dns.RR, error) {
	lim := m.limits()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, lim.MaxTransferTime)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, lim.IdleTimeout)
	defer dcancel()
	q := new(dns.Msg)
	q.SetQuestion(cfg.Origin, qtype)
	q.RecursionDesired = false
	if qtype == dns.TypeIXFR {
		q.Ns = []dns.RR{dns.Copy(ours)}
	}
	if cfg.Key != nil {
		q.SetTsig(cfg.Key.Name, cfg.Key.Algorithm, 300, time.Now().Unix())
	}
	var d net.Dialer
	if lim.Source.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(lim.Source, 0))
	}
	c, err := d.DialContext(dctx, "tcp", primary)
	if err != nil {
		return nil, wrap(err, dctx.Err(), primary, false)
	}
	// The overall limit closes the connection; each read has the idle
	// timeout as its deadline (Transfer.ReadTimeout).
	defer context.AfterFunc(ctx, func() { c.Close() })()
	defer c.Close()
	tr := &dns.Transfer{Conn: &dns.Conn{Conn: c}, ReadTimeout: lim.IdleTimeout, WriteTimeout: lim.IdleTimeout,
		TsigProvider: keyring(cfg.Key)}
	ch, err := tr.In(q, primary)
	if err != nil {
		return nil, wrap(err, ctx.Err(), primary, false)
	}
	timeoutErr := func(n int) *xferError {
		if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return newErr("timeout", "transfer from %s took longer than the limit of %s (max_transfer_time_in) after %d messages",
				primary, lim.MaxTransferTime, n)
		}
		return newErr("timeout", "no message from %s for %s (idle timeout) after %d messages", primary, lim.IdleTimeout, n)
	}
	var rrs []dns.RR
	var ferr error
	n := 0
	for env := range ch { // drained to the end: In's goroutine then exits
		if ferr != nil {
			continue
		}
		if env.Error != nil {
			ferr = wrap(env.Error, ctx.Err(), primary, n > 0)
			if parent.Err() == nil && (ctx.Err() != nil || isTimeout(env.Error)) {
				ferr = timeoutErr(n)
			}
			continue
		}
		n++
		rrs = append(rrs, env.RR...)
	}
	if ferr != nil {
		return nil, ferr
	}
	if len(rrs) == 0 {
		return nil, newErr("broken", "empty transfer from %s", primary)
	}
	return rrs, nil
}

// fullZone checks an AXFR-style answer (SOA, records, the same SOA) and
// returns the zone, SOA first, the rest sorted.
func fullZone(origin string, resp []dns.RR) ([]dns.RR, error) {
	if len(resp) < 2 {
		return nil, errors.New("no final SOA")
	}
	first, ok := resp[0].(*dns.SOA)
	if !ok {
		return nil, errors.New("no SOA first")
	}
	last, ok := resp[len(resp)-1].(*dns.SOA)
	if !ok {
		return nil, errors.New("no final SOA")
	}
	if last.Serial != first.Serial {
		return nil, fmt.Errorf("final SOA serial %d differs from the first, %d", last.Serial, first.Serial)
	}
	rrs := make([]dns.RR, len(resp)-1)
	copy(rrs, resp[:len(resp)-1])
	if err := checkZone(origin, rrs); err != nil {
		return nil, err
	}
	sortRecords(rrs[1:])
	return dedup(rrs), nil
}

// dedup drops records duplicating an earlier one (rrs sorted but for the
// SOA at 0).
func dedup(rrs []dns.RR) []dns.RR {
	out := rrs[:1]
	for _, rr := range rrs[1:] {
		if prev := out[len(out)-1]; len(out) > 1 && dns.IsDuplicate(prev, rr) {
			continue
		}
		out = append(out, rr)
	}
	return out
}

// rrset keeps records in buckets by owner and type, compared with
// dns.IsDuplicate (owner case-insensitive, TTL ignored).
type rrset map[string][]dns.RR

func bucket(rr dns.RR) string {
	return strings.ToLower(rr.Header().Name) + "/" + strconv.Itoa(int(rr.Header().Rrtype))
}

func (s rrset) find(rr dns.RR) int {
	for i, have := range s[bucket(rr)] {
		if dns.IsDuplicate(have, rr) {
			return i
		}
	}
	return -1
}

func (s rrset) remove(rr dns.RR) bool {
	i := s.find(rr)
	if i < 0 {
		return false
	}
	k := bucket(rr)
	b := s[k]
	s[k] = append(b[:i:i], b[i+1:]...)
	if len(s[k]) == 0 {
		delete(s, k)
	}
	return true
}

func (s rrset) add(rr dns.RR) {
	s.remove(rr) // a re-added record takes the new TTL
	k := bucket(rr)
	s[k] = append(s[k], rr)
}

// applyIXFR applies an IXFR answer (RFC 1995 §4) to cur (SOA first, the
// rest in sortRecords order without duplicates): one or more sequences of
// old SOA, deletions, new SOA, additions, between the primary's SOA first
// and last, condensed or not. An answer whose second record is not an SOA
// is a full zone (full). A single SOA equal to ours: uptodate. A deletion
// of a record we do not have, a sequence not starting at the serial
// reached, or a missing final SOA is an error: the caller falls back to
// AXFR. The work follows the size of the difference (lookups by binary
// search in cur), but for one pass copying cur's records.
func applyIXFR(origin string, cur, resp []dns.RR) (rrs []dns.RR, full, uptodate bool, err error) {
	first, ok := resp[0].(*dns.SOA)
	if !ok {
		return nil, false, false, errors.New("no SOA first")
	}
	curSOA := cur[0].(*dns.SOA)
	if len(resp) == 1 {
		switch {
		case first.Serial == curSOA.Serial:
			return nil, false, true, nil
		case serialNewer(first.Serial, curSOA.Serial):
			return nil, false, false, fmt.Errorf("only the SOA (serial %d), newer than ours (%d)", first.Serial, curSOA.Serial)
		}
		return nil, false, false, fmt.Errorf("only the SOA (serial %d), older than ours (%d)", first.Serial, curSOA.Serial)
	}
	if _, ok := resp[1].(*dns.SOA); !ok {
		rrs, err := fullZone(origin, resp)
		return rrs, true, false, err
	}
	d := delta{cur: cur[1:], removed: map[dns.RR]bool{}, added: rrset{}}
	isSOA := func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeSOA }
	inZone := func(rr dns.RR) error {
		if !dns.IsSubDomain(origin, rr.Header().Name) {
			return fmt.Errorf("out of zone: %s", rr)
		}
		return nil
	}
	serial := curSOA.Serial
	soa := curSOA
	pos := 1
	for {
		old := resp[pos].(*dns.SOA) // an SOA: the loop only gets here on one
		if old.Serial != serial {
			return nil, false, false, fmt.Errorf("a difference from serial %d where we have %d", old.Serial, serial)
		}
		pos++
		for ; pos < len(resp) && !isSOA(resp[pos]); pos++ {
			if err := inZone(resp[pos]); err != nil {
				return nil, false, false, err
			}
			if !d.remove(resp[pos]) {
				return nil, false, false, fmt.Errorf("deletion of a record we do not have: %s", resp[pos])
			}
		}
		if pos >= len(resp) {
			return nil, false, false, errors.New("no new SOA in a difference")
		}
		soa = resp[pos].(*dns.SOA)
		pos++
		for ; pos < len(resp) && !isSOA(resp[pos]); pos++ {
			if err := inZone(resp[pos]); err != nil {
				return nil, false, false, err
			}
			d.add(resp[pos])
		}
		serial = soa.Serial
		if pos >= len(resp) {
			return nil, false, false, errors.New("no final SOA")
		}
		if serial == first.Serial {
			if pos != len(resp)-1 {
				return nil, false, false, errors.New("records after the final SOA")
			}
			if resp[pos].(*dns.SOA).Serial != first.Serial {
				return nil, false, false, errors.New("final SOA serial differs from the first")
			}
			break
		}
	}
	if !strings.EqualFold(soa.Hdr.Name, origin) {
		return nil, false, false, fmt.Errorf("SOA not at the apex: %s", soa)
	}
	return d.result(soa), false, false, nil
}

// delta is an IXFR's changes to a copy: cur (sorted, without the SOA),
// the records of cur removed (by identity), the records added.
type delta struct {
	cur     []dns.RR
	removed map[dns.RR]bool
	added   rrset
}

// inCur returns the record of cur that rr duplicates and is not removed
// yet, or nil: a binary search for rr's owner and type, then a scan of
// that RRset.
func (d *delta) inCur(rr dns.RR) dns.RR {
	name, t := canonicalKey(rr.Header().Name), rr.Header().Rrtype
	i := sort.Search(len(d.cur), func(i int) bool {
		h := d.cur[i].Header()
		if c := strings.Compare(canonicalKey(h.Name), name); c != 0 {
			return c > 0
		}
		return h.Rrtype >= t
	})
	for ; i < len(d.cur); i++ {
		h := d.cur[i].Header()
		if h.Rrtype != t || canonicalKey(h.Name) != name {
			break
		}
		if !d.removed[d.cur[i]] && dns.IsDuplicate(d.cur[i], rr) {
			return d.cur[i]
		}
	}
	return nil
}

// remove deletes rr (an added one first, else cur's); false if there is
// none.
func (d *delta) remove(rr dns.RR) bool {
	if d.added.remove(rr) {
		return true
	}
	if have := d.inCur(rr); have != nil {
		d.removed[have] = true
		return true
	}
	return false
}

// add adds rr, replacing a duplicate (a new TTL).
func (d *delta) add(rr dns.RR) {
	if have := d.inCur(rr); have != nil {
		d.removed[have] = true
	}
	d.added.add(rr)
}

// result is the new copy: soa, cur without the removed records, and the
// added ones in their places.
func (d *delta) result(soa *dns.SOA) []dns.RR {
	var add []dns.RR
	for _, b := range d.added {
		add = append(add, b...)
	}
	sortRecords(add)
	at := make([]int, len(add)) // where in cur each goes: before cur[at[i]]
	for i, rr := range add {
		at[i] = sort.Search(len(d.cur), func(j int) bool { return recordCompare(d.cur[j], rr) > 0 })
	}
	out := make([]dns.RR, 0, 1+len(d.cur)-len(d.removed)+len(add))
	out = append(out, soa)
	j := 0
	for i, rr := range d.cur {
		for ; j < len(add) && at[j] == i; j++ {
			out = append(out, add[j])
		}
		if !d.removed[rr] {
			out = append(out, rr)
		}
	}
	return append(out, add[j:]...)
}

func tsigOf(r *dns.Msg) *dns.TSIG {
	if r == nil {
		return nil
	}
	return r.IsTsig()
}

func tsigRcode(rc uint16) string {
	switch rc {
	case dns.RcodeBadSig:
		return "BADSIG"
	case dns.RcodeBadKey:
		return "BADKEY"
	case dns.RcodeBadTime:
		return "BADTIME"
	case dns.RcodeBadTrunc:
		return "BADTRUNC"
	}
	return strconv.Itoa(int(rc))
}
