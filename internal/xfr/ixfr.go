package xfr

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// SerialNewer reports whether serial a is newer than b in RFC 1982 serial
// number arithmetic (32 bits): a ≠ b and a − b, mod 2³², is below 2³¹.
// The comparison with a − b exactly 2³¹ is undefined by RFC 1982 and
// reported false both ways.
func SerialNewer(a, b uint32) bool {
	d := a - b
	return d != 0 && d < 1<<31
}

// Delta is one serial change of a zone: the SOA before and after, and the
// records removed and added (SOA excluded).
type Delta struct {
	From, To *dns.SOA
	Del, Add []dns.RR
}

// rrKey buckets records that can be duplicates of each other.
func rrKey(rr dns.RR) string {
	h := rr.Header()
	return fmt.Sprintf("%s/%d/%d", strings.ToLower(h.Name), h.Rrtype, h.Class)
}

// same is dns.IsDuplicate plus an equal TTL.
func same(a, b dns.RR) bool {
	return a.Header().Ttl == b.Header().Ttl && dns.IsDuplicate(a, b)
}

// Diff returns what changed from old to new (both whole zones, SOA first,
// any order after): the records of old not in new and those of new not in
// old. Records are matched like dns.IsDuplicate (names case-insensitive),
// and a TTL change is a delete plus an add. SOA records are left out.
// Duplicates within a zone count once.
func Diff(old, new []dns.RR) (del, add []dns.RR) {
	index := func(rrs []dns.RR) map[string][]dns.RR {
		m := map[string][]dns.RR{}
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeSOA {
				continue
			}
			k := rrKey(rr)
			dup := false
			for _, o := range m[k] {
				if same(o, rr) {
					dup = true
					break
				}
			}
			if !dup {
				m[k] = append(m[k], rr)
			}
		}
		return m
	}
	in := func(m map[string][]dns.RR, rr dns.RR) bool {
		for _, o := range m[rrKey(rr)] {
			if same(o, rr) {
				return true
			}
		}
		return false
	}
	om, nm := index(old), index(new)
	seen := map[string]bool{}
	for _, rr := range old {
		if k := rrKey(rr); rr.Header().Rrtype != dns.TypeSOA && !seen[k] {
			seen[k] = true
			for _, o := range om[k] {
				if !in(nm, o) {
					del = append(del, o)
				}
			}
		}
	}
	seen = map[string]bool{}
	for _, rr := range new {
		if k := rrKey(rr); rr.Header().Rrtype != dns.TypeSOA && !seen[k] {
			seen[k] = true
			for _, n := range nm[k] {
				if !in(om, n) {
					add = append(add, n)
				}
			}
		}
	}
	return del, add
}

// Journal keeps the last N deltas of one zone, for IXFR. It is safe for
// concurrent use (one writer, many readers). The deltas it holds are
// shared with callers of Since and must not be modified.
type Journal struct {
	mu     sync.RWMutex
	n      int
	deltas []Delta // oldest first, each To serial the next From serial
}

// NewJournal returns a journal keeping at most n deltas (n < 1 means 1).
func NewJournal(n int) *Journal {
	if n < 1 {
		n = 1
	}
	return &Journal{n: n}
}

// Add appends d. d.From's serial must be the last delta's To serial;
// otherwise (a gap, a reload from scratch) the journal restarts from d.
// Beyond N deltas the oldest is dropped.
func (j *Journal) Add(d Delta) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if l := len(j.deltas); l > 0 && j.deltas[l-1].To.Serial != d.From.Serial {
		j.deltas = nil
	}
	if len(j.deltas) == j.n {
		// A fresh slice, so what Since handed out stays as it was.
		j.deltas = append([]Delta(nil), j.deltas[1:]...)
	}
	j.deltas = append(j.deltas, d)
}

// Len returns how many deltas the journal holds.
func (j *Journal) Len() int {
	j.mu.RLock()
	defer j.mu.RUnlock()
	return len(j.deltas)
}

// Since returns the deltas leading from serial to the current one (none
// when serial is the current one), or false when serial is not in the
// journal (then the caller answers AXFR-style).
func (j *Journal) Since(serial uint32) ([]Delta, bool) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	l := len(j.deltas)
	if l == 0 {
		return nil, false
	}
	if j.deltas[l-1].To.Serial == serial {
		return []Delta{}, true
	}
	for i, d := range j.deltas {
		if d.From.Serial == serial {
			return append([]Delta(nil), j.deltas[i:]...), true
		}
	}
	return nil, false
}

// IXFR returns the record sequence answering an IXFR request whose client
// has serial have (RFC 1995 §4):
//   - the current SOA alone when have is current or newer (RFC 1982);
//   - the incremental form — current SOA, then per delta its From SOA, its
//     deletions, its To SOA, its additions, then the current SOA — when j
//     holds the deltas from have to the current serial;
//   - otherwise the AXFR-style form: current SOA, every other record,
//     current SOA.
//
// zone is the whole current zone, SOA first (any further SOA is ignored).
// j may be nil.
func IXFR(zone []dns.RR, have uint32, j *Journal) []dns.RR {
	cur := zone[0].(*dns.SOA)
	if rrs, ok := Incremental(cur, have, j); ok {
		return rrs
	}
	out := make([]dns.RR, 0, len(zone)+1)
	out = append(out, cur)
	for _, rr := range zone[1:] {
		if rr.Header().Rrtype != dns.TypeSOA {
			out = append(out, rr)
		}
	}
	return append(out, cur)
}

// ServeIXFR is Serve for an IXFR request: it answers req on w with rrs
// (what IXFR returned), split into messages of at most DefaultLimit bytes,
// each signed when req is signed (as Serve does, including NOTAUTH for a
// request whose TSIG did not verify). A request without the client's SOA
// in its authority section is answered FORMERR. A single-SOA answer is one
// message. Over UDP the answer is sent when it is the single SOA or fits
// in 512 bytes (or the request's EDNS size); otherwise the reply is just
// the current SOA (RFC 1995 §2), so that the client retries over TCP.
func ServeIXFR(w dns.ResponseWriter, req *dns.Msg, rrs []dns.RR) error {
	if done, err := checkIXFR(w, req); done {
		return err
	}
	t := req.IsTsig()
	if len(rrs) == 0 || rrs[0].Header().Rrtype != dns.TypeSOA {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		signLike(m, req, w)
		w.WriteMsg(m)
		return errors.New("xfr: records must start with the zone's SOA")
	}
	if _, ok := w.RemoteAddr().(*net.TCPAddr); !ok {
		size := dns.MinMsgSize
		if o := req.IsEdns0(); o != nil && int(o.UDPSize()) > size {
			size = int(o.UDPSize())
		}
		m := reply(req)
		if req.IsEdns0() != nil {
			m.SetEdns0(uint16(size), false) // RFC 6891 §6.1.1: answer EDNS with EDNS
		}
		m.Answer = rrs
		n := m.Len()
		if t != nil {
			n += tsigRoom(t)
		}
		if len(rrs) > 1 && n > size {
			m.Answer = rrs[:1]
		}
		signLike(m, req, w)
		return w.WriteMsg(m)
	}
	return writeAll(w, req, rrs)
}

// checkIXFR answers what ServeIXFR refuses (done: the request is
// answered, err says why): not an IXFR request, no client SOA (FORMERR),
// a TSIG that did not verify (NOTAUTH).
func checkIXFR(w dns.ResponseWriter, req *dns.Msg) (done bool, err error) {
	if len(req.Question) != 1 || req.Question[0].Qtype != dns.TypeIXFR {
		return true, errors.New("xfr: not an IXFR request")
	}
	if len(req.Ns) == 0 || req.Ns[0].Header().Rrtype != dns.TypeSOA {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		signLike(m, req, w)
		w.WriteMsg(m)
		return true, errors.New("xfr: IXFR request without the client's SOA")
	}
	if t := req.IsTsig(); t != nil && w.TsigStatus() != nil {
		return true, refuseTsig(w, req)
	}
	return false, nil
}

// Incremental returns the answer to an IXFR request from a client at
// serial have when it is not a whole zone (RFC 1995 §4): the current SOA
// alone when have is current or newer, or the incremental form when j
// holds the deltas from have to cur; ok is false when only the
// AXFR-style form answers (IXFR's last case), which the caller streams.
func Incremental(cur *dns.SOA, have uint32, j *Journal) (rrs []dns.RR, ok bool) {
	if have == cur.Serial || SerialNewer(have, cur.Serial) {
		return []dns.RR{cur}, true
	}
	if j != nil {
		if ds, ok := j.Since(have); ok && len(ds) > 0 && ds[len(ds)-1].To.Serial == cur.Serial {
			out := []dns.RR{cur}
			for _, d := range ds {
				out = append(out, d.From)
				out = append(out, d.Del...)
				out = append(out, d.To)
				out = append(out, d.Add...)
			}
			return append(out, cur), true
		}
	}
	return nil, false
}

// ServeIXFRStream answers, over TCP, an IXFR request in the AXFR-style
// form (what Incremental does not answer) with the records each yields,
// streamed as writeStream does; the request is checked as ServeIXFR
// checks it.
func ServeIXFRStream(w dns.ResponseWriter, req *dns.Msg, each func(yield func(dns.RR) bool)) error {
	if done, err := checkIXFR(w, req); done {
		return err
	}
	return writeStream(w, req, each)
}

// signLike sets a TSIG RR on m when req was signed and verified.
func signLike(m, req *dns.Msg, w dns.ResponseWriter) {
	if t := req.IsTsig(); t != nil && w.TsigStatus() == nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, 0)
	}
}
