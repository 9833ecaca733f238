package xfr

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sort"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// Zone is one zone served, as the Service sees it: plain data the server
// takes from what it serves now (Options.Zones).
type Zone struct {
	// Origin is canonical (lower case, absolute).
	Origin string
	// Serial is the serial served; SOA the apex SOA served, nil for a
	// zone answered SERVFAIL (nothing to transfer).
	Serial uint32
	SOA    *dns.SOA
	// FileSerial is the serial of the zone's file (or transferred copy);
	// Serial differs when the zone was given a newer one to export
	// (Service.Serials).
	FileSerial uint32
	// In is set for a zone transferred in from primaries.
	In bool
	// Fixed is set for a zone signed elsewhere: its SOA is signed by its
	// signer, so its serial is exported as it is, never given the next
	// one (nor agreed with a fleet), whatever changes under it.
	Fixed bool

	// The rest concerns a zone transferred out; none of it is read for a
	// zone without Secondaries.

	// Secondaries may transfer the zone, and are notified of each new
	// serial.
	Secondaries []Secondary
	// Journal is how many serial changes are kept for IXFR (0: none).
	Journal int
	// Version identifies the zone's records: a comparable value that is
	// the same only for the same records (a *zone.Zone, which a reload
	// keeps when the file did not change), so that their digest is taken
	// once rather than at each Refresh.
	Version any
	// Records appends the zone's records to dst, its SOA first.
	Records func(dst []dns.RR) []dns.RR
	// Each, when set, yields the records Records appends, in its
	// order, without copying them: a transfer out streams them (nil:
	// from Records).
	Each func(yield func(dns.RR) bool)
	// Fallbacks are the records the zone's steered names are exported
	// with (a secondary cannot steer).
	Fallbacks []dns.RR
	// SigPeriod is set on an export whose RRSIGs this node makes itself
	// (a signed zone's signed export): in a fleet (Options.Agreement),
	// its digest then takes each RRSIG without what only this node gave
	// it — inception, expiration, signature octets — and the earliest
	// expiration among them rounded down to SigPeriod (sigSum). 0: the
	// RRSIGs are digested whole (an unsigned or pre-signed zone, whose
	// signatures are the same on every node).
	SigPeriod time.Duration
	// NodeSigned is set on a Fixed export holding RRSIGs this node
	// makes itself (a multi-signer zone's steered names, signed with
	// steer's ZSK under the signer's serial): in a fleet, another node's
	// copy of the same serial holds other signatures for them, so a
	// delta from this node's copy does not apply to it (exact).
	NodeSigned bool
}

// servedZone is what the zone gauges read of a Zone: 24 bytes where the
// Zone is 144, which a hosting provider's 100,000 zones (none transferred
// out) would keep for as long as they are served.
type servedZone struct {
	Origin string
	Serial uint32
	In     bool
}

// servedOf is the gauges' copy of zones.
func servedOf(zones []Zone) *[]servedZone {
	out := make([]servedZone, len(zones))
	for i := range zones {
		out[i] = servedZone{Origin: zones[i].Origin, Serial: zones[i].Serial, In: zones[i].In}
	}
	return &out
}

// Secondary is a server that may transfer a zone out.
type Secondary struct {
	// Prefix holds the addresses its requests may come from.
	Prefix netip.Prefix
	// Key is the key its requests must be signed with, and its NOTIFYs
	// are; a zero Key allows nothing.
	Key tsig.Key
	// Notify is where NOTIFYs go (host:port); "" for nowhere.
	Notify string
}

// export is one zone as transferred out now: its records streamed from
// the zone served (each), its steered names' fallbacks after them, and
// its SOA again. It holds no copy of the zone.
type export struct {
	serial    uint32
	soa       *dns.SOA
	each      func(yield func(dns.RR) bool) // SOA first, then the records
	fallbacks []dns.RR
	journal   *Journal
	acl       []aclEntry
}

// records yields what a transfer of e sends: the SOA, the records, the
// fallbacks and the SOA again.
func (e *export) records(yield func(dns.RR) bool) {
	ok := true
	e.each(func(rr dns.RR) bool {
		ok = yield(rr)
		return ok
	})
	if !ok {
		return
	}
	for _, rr := range e.fallbacks {
		if !yield(rr) {
			return
		}
	}
	yield(e.soa)
}

// eachOf is Zone.Each, or a stream of Zone.Records when it is not set.
func eachOf(z *Zone) func(yield func(dns.RR) bool) {
	if z.Each != nil {
		return z.Each
	}
	records := z.Records
	return func(yield func(dns.RR) bool) {
		for _, rr := range records(nil) {
			if !yield(rr) {
				return
			}
		}
	}
}

type aclEntry struct {
	prefix netip.Prefix
	key    string // canonical key name the request must be signed with
}

// exportState is what Refresh last published of a zone: no copy of its
// records, but the version they are (Zone.Version and its Records, for
// the journal's delta when the zone itself changes) and its fallbacks
// (for the delta when only they move).
type exportState struct {
	serial    uint32
	soa       *dns.SOA
	version   any
	records   func(dst []dns.RR) []dns.RR
	fallbacks []dns.RR
	sum       [32]byte
	journal   *Journal
}

// savedSerial is a zone's last exported serial and digest, in the state
// file.
type savedSerial struct {
	Serial uint32 `json:"serial"`
	Sum    string `json:"sum"`
}

// Serials returns the serials builds must give zones, by origin: a zone
// whose export changed without a new serial in its file is given the next
// one (secondaries only transfer a newer serial, and the server's own SOA
// must say the serial its transfers carry). nil when there are none.
func (s *Service) Serials() map[string]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.serials) == 0 {
		return nil
	}
	m := make(map[string]uint32, len(s.serials))
	for k, v := range s.serials {
		m[k] = v
	}
	return m
}

// HealthChanged re-exports the zones shortly after health changed: a
// steered name's fallback may have moved. Changes within 500 ms are taken
// together.
func (s *Service) HealthChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthT != nil || len(*s.exports.Load()) == 0 {
		return
	}
	s.healthT = time.AfterFunc(500*time.Millisecond, func() {
		s.mu.Lock()
		s.healthT = nil
		s.mu.Unlock()
		s.Refresh()
	})
}

// nextSerial decides the serial to export a zone with: the file's when it
// is newer than the last exported, the last exported while the content
// is the same, else the one after it.
func nextSerial(file uint32, last *savedSerial, sum string) uint32 {
	switch {
	case last == nil || SerialNewer(file, last.Serial):
		return file
	case last.Sum == sum:
		return last.Serial
	}
	if s := last.Serial + 1; s != 0 {
		return s
	}
	return 1
}

// Refresh recomputes what each zone with secondaries exports from the
// zones served now (Options.Zones), publishes it, journals the change and
// notifies the secondaries of a new serial. A zone whose export needs a
// new serial gets it through a rebuild (Options.Rebuild), and is
// published (and notified) at the Refresh after it.
func (s *Service) Refresh() {
	var zones []Zone
	if s.o.Zones != nil {
		zones = s.o.Zones()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served.Store(servedOf(zones))
	cur := *s.exports.Load()
	next := map[string]*export{}
	live := map[any]bool{}
	rebuild, changed := false, false
	type notice struct {
		origin  string
		soa     *dns.SOA
		targets []Target
	}
	var notices []notice
	for i := range zones {
		z := &zones[i]
		if len(z.Secondaries) == 0 || z.SOA == nil {
			continue // SERVFAIL: nothing to transfer
		}
		origin := z.Origin
		live[z.Version] = true
		sum := s.sum(z)
		hexSum := hex.EncodeToString(sum[:])
		var last *savedSerial
		st := s.state[origin]
		if st != nil {
			last = &savedSerial{Serial: st.serial, Sum: hex.EncodeToString(st.sum[:])}
		} else if sv, ok := s.saved[origin]; ok {
			last = &sv
		}
		target := nextSerial(z.FileSerial, last, hexSum)
		if z.Fixed {
			target = z.Serial
			if last != nil && SerialNewer(last.Serial, target) && s.behind[origin] != target {
				// Its secondaries hold a newer serial (steer gave the
				// zone its own before it came signed elsewhere): they
				// keep that copy until the signer's passes it.
				s.behind[origin] = target
				s.log.Warn("zone transfers: the signer's serial is older than the one last exported; secondaries keep their copy until the signer's serial passes it (raise the serial at the signer)",
					"zone", origin, "serial", target, "last_exported", last.Serial)
			}
		} else if s.o.Agreement != nil {
			target = s.agree(origin, hexSum, target, last == nil || last.Sum != hexSum)
		}
		if target != z.Serial {
			if s.serials[origin] != target {
				s.serials[origin] = target
				rebuild = true
				s.log.Info("zone transfers: what the zone exports changed without a new serial in its file; giving it the next one",
					"zone", origin, "file_serial", z.FileSerial, "serial", target)
			}
			if e := cur[origin]; e != nil {
				next[origin] = e // the last consistent export serves meanwhile
			}
			continue
		}
		if target == z.FileSerial {
			delete(s.serials, origin)
		} else {
			s.serials[origin] = target
		}
		notify := false
		switch {
		case st == nil:
			st = &exportState{}
			if z.Journal > 0 && s.exact(z) {
				st.journal = NewJournal(z.Journal)
			}
			s.state[origin] = st
			notify = true // as BIND and Knot do at start-up
		case st.serial != target:
			if st.journal != nil {
				st.journal.Add(journalDelta(st, z))
			}
			notify = true
			s.log.Info("zone transfers: new serial", "zone", origin, "from", st.serial, "to", target)
		}
		st.serial, st.soa, st.version, st.records, st.fallbacks, st.sum = target, z.SOA, z.Version, z.Records, z.Fallbacks, sum
		if sv := (savedSerial{Serial: target, Sum: hexSum}); s.saved[origin] != sv {
			s.saved[origin] = sv
			changed = true
		}
		if !s.exact(z) {
			st.journal = nil // AXFR-style from now on (exact)
		}
		e := &export{serial: target, soa: z.SOA, each: eachOf(z), fallbacks: z.Fallbacks, journal: st.journal}
		var targets []Target
		for _, sec := range z.Secondaries {
			e.acl = append(e.acl, aclEntry{prefix: sec.Prefix, key: sec.Key.Name})
			if sec.Notify != "" {
				key := sec.Key
				targets = append(targets, Target{Addr: sec.Notify, Key: &key})
			}
		}
		next[origin] = e
		if notify && len(targets) > 0 {
			notices = append(notices, notice{origin, z.SOA, targets})
		}
	}
	// The zones served are indexed only when a zone exported before
	// is not now: a reload of 100,000 zones, a few transferred out,
	// does not index 100,000 names.
	var served map[string]bool
	for o := range s.state {
		if next[o] != nil {
			continue
		}
		if served == nil {
			served = make(map[string]bool, len(zones))
			for i := range zones {
				served[zones[i].Origin] = true
			}
		}
		if !served[o] {
			delete(s.state, o) // no longer served
		}
	}
	for v := range s.sums {
		if !live[v] {
			delete(s.sums, v)
		}
	}
	s.exports.Store(&next)
	// Only now: a secondary that asks at once must find the new serial.
	for _, n := range notices {
		s.notifier.Send(n.origin, n.soa, n.targets)
	}
	if changed {
		s.save()
	}
	if rebuild && s.o.Rebuild != nil {
		s.o.Rebuild("zone serial")
	}
}

// exact reports whether a serial of z names one export, record for
// record, so that a delta between two serials applies to any copy of the
// first (the IXFR journal). It does not for a signed export in a fleet:
// each node signs it itself, so two nodes' exports under one agreed
// serial differ in their RRSIGs (inception, expiration and, for ECDSA or
// a signing time a second apart, the signature), and a signature renewed
// within the serial's validity period changes the export without a new
// serial (sigSum). A delta from this node's export would delete RRSIGs a
// secondary holding another node's copy does not have; such a zone is
// answered AXFR-style (RFC 1995 §4), which every copy takes.
func (s *Service) exact(z *Zone) bool {
	return s.o.Agreement == nil || (z.SigPeriod <= 0 && !z.NodeSigned)
}

// journalDelta is the journal's entry for the change from st to z. When the
// zone's records are the same version (its serial or a fallback moved),
// only the fallbacks are compared: the cost is the steered names', not
// the zone's. Otherwise the whole exports are.
func journalDelta(st *exportState, z *Zone) Delta {
	d := Delta{From: st.soa, To: z.SOA}
	if st.version != nil && st.version == z.Version {
		d.Del, d.Add = Diff(st.fallbacks, z.Fallbacks)
		return d
	}
	d.Del, d.Add = Diff(append(st.records(nil), st.fallbacks...), append(z.Records(nil), z.Fallbacks...))
	return d
}

// agreeBackoff is how long after a failed agreement the node exports its
// own serials without asking the fleet again (each try may wait for the
// store's timeout, inside a reload).
const agreeBackoff = 10 * time.Second

// agree returns the serial the fleet gives the export of origin whose
// digest is sum (Options.Agreement), this node's own choice being
// target: when the content is new here (changed), one agreement with the
// fleet (a compare-and-swap when the fleet has not agreed this content
// yet); otherwise the fleet's serial for the same content when it is
// newer (another node moved on and back). When the fleet cannot be
// reached, the node's own choice is exported, and said.
func (s *Service) agree(origin, sum string, target uint32, changed bool) uint32 {
	ag := s.o.Agreement
	if a, ok := s.agreed[origin]; ok && a.Sum == sum && !SerialNewer(target, a.Serial) {
		target = a.Serial // agreed already (the Refresh after the rebuild)
	} else if changed {
		if time.Since(s.agreeFailed) < agreeBackoff {
			return target // the fleet was unreachable a moment ago: not another wait
		}
		serial, err := ag.Agree(origin, sum, target)
		if err != nil {
			s.agreeFailed = time.Now()
			s.log.Warn("zone transfers: cannot agree the new serial with the fleet; exporting this node's own", "zone", origin, "serial", target, "err", err)
			return target
		}
		if serial != target {
			s.log.Info("zone transfers: serial agreed with the fleet", "zone", origin, "own", target, "agreed", serial)
		}
		target = serial
		s.agreed[origin] = savedSerial{Serial: serial, Sum: sum}
	}
	if serial, asum, ok := ag.Agreed(origin); ok && asum == sum && SerialNewer(serial, target) {
		s.log.Info("zone transfers: the fleet gives this content a newer serial; taking it", "zone", origin, "own", target, "agreed", serial)
		target = serial
		s.agreed[origin] = savedSerial{Serial: serial, Sum: sum}
	}
	return target
}

// sum digests what z exports: its records (the SOA without its serial,
// nor its signatures) and its steered names' fallbacks. The records' part is kept per
// Version; the fallbacks are few and digested each time. A signed
// export in a fleet digests its RRSIGs as sigSum says.
func (s *Service) sum(z *Zone) [32]byte {
	zs, ok := s.sums[z.Version]
	if !ok {
		h := sha256.New()
		soa := dns.Copy(z.SOA).(*dns.SOA)
		soa.Serial = 0
		fmt.Fprintln(h, soa.String())
		rrs := z.Records(nil)
		var sigs *sigSum
		if !s.exact(z) {
			sigs = &sigSum{period: uint32(max(z.SigPeriod/time.Second, 1))}
		}
		for _, rr := range rrs[1:] {
			sig, ok := rr.(*dns.RRSIG)
			switch {
			case ok && sig.TypeCovered == dns.TypeSOA:
				// A signed export's SOA signatures change with the
				// serial, which the digest leaves out.
			case ok && sigs != nil:
				sigs.add(h, sig)
			default:
				fmt.Fprintln(h, rr.String())
			}
		}
		if sigs != nil {
			sigs.finish(h)
		}
		copy(zs[:], h.Sum(nil))
		if z.Version != nil {
			s.sums[z.Version] = zs
		}
	}
	h := sha256.New()
	h.Write(zs[:])
	lines := make([]string, 0, len(z.Fallbacks))
	for _, rr := range z.Fallbacks {
		lines = append(lines, rr.String())
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// sigSum digests the RRSIGs of a signed export that each node of a
// fleet signs itself, so that nodes with the same records and keys
// agree one serial, and a renewal of the signatures still gets the
// next one:
//
//   - each RRSIG by what every node gives it: owner, TTL, type covered,
//     algorithm, labels, original TTL, key tag and signer (a new key, a
//     key retired, a TTL changed: a new serial);
//   - not its inception, expiration and signature, which are the
//     node's own (its signing time; ECDSA's octets);
//   - but the earliest expiration among them rounded down to the
//     period (Zone.SigPeriod, the same on every node signing with the
//     same dnssec settings): the export's validity period.
//
// Signatures are renewed as they fall due, so the earliest expiration
// moves on, and leaves its period, within the period plus the renewal
// margin; every node then exports a new digest, and the first to see it
// agrees the next serial, which the others take when they get there (a
// node signing a moment later is a moment later). A copy a secondary
// took under a serial expires no earlier than the start of its period,
// while every node moves on before that (the node picks the period so:
// exportSigPeriod), so a secondary always finds a newer serial before
// what it serves expires. Two nodes exporting one serial with different
// signatures are both valid: a secondary transferring it from either
// serves a zone that validates; only the IXFR journal cannot serve such
// zones (Service.exact).
type sigSum struct {
	period  uint32
	earlier uint32 // the earliest expiration seen
	any     bool
}

func (g *sigSum) add(h io.Writer, sig *dns.RRSIG) {
	c := *sig
	c.Inception, c.Expiration, c.Signature = 0, 0, ""
	fmt.Fprintln(h, c.String())
	if !g.any || SerialNewer(g.earlier, sig.Expiration) {
		g.earlier, g.any = sig.Expiration, true
	}
}

func (g *sigSum) finish(h io.Writer) {
	if g.any {
		fmt.Fprintf(h, "validity period %d\n", g.earlier/g.period)
	}
}

// save writes the exported serials atomically.
func (s *Service) save() {
	if s.file == "" {
		return
	}
	data, _ := json.MarshalIndent(s.saved, "", "  ")
	tmp := s.file + ".tmp"
	err := os.WriteFile(tmp, append(data, '\n'), 0o644)
	if err == nil {
		err = os.Rename(tmp, s.file)
	}
	if err != nil {
		s.log.Error("cannot keep the exported zone serials; a restart may export an older serial", "file", s.file, "err", err)
	}
}

// Transfer answers an AXFR or IXFR request req received over TCP from the
// address from, writing
// every message on w, which signs each one when req was signed (as
// tsig.NewConnWriter's does); w.TsigStatus() non-nil means req's TSIG did not
// verify, and req is then answered NOTAUTH with the TSIG error. An error
// closes the connection.
func (s *Service) Transfer(w dns.ResponseWriter, req *dns.Msg, from netip.Addr) error {
	start := time.Now()
	if len(req.Question) != 1 {
		return errors.New("xfr: a transfer request has one question")
	}
	q := req.Question[0]
	origin := dns.CanonicalName(q.Name)
	kind := "axfr"
	if q.Qtype == dns.TypeIXFR {
		kind = "ixfr"
	}
	from = from.Unmap()
	log := s.log.With("zone", origin, "type", kind, "to", from.String())
	t := req.IsTsig()
	if t != nil && w.TsigStatus() != nil {
		// Serve answers NOTAUTH with the TSIG error (RFC 8945 §5.2).
		log.Warn("zone transfer refused: TSIG did not verify", "key", t.Hdr.Name, "err", w.TsigStatus())
		s.met.transfer(origin, "out", kind, "tsig")
		if kind == "ixfr" {
			return ignoreRefusal(ServeIXFR(w, req, nil))
		}
		return ignoreRefusal(Serve(w, req, nil))
	}
	e := (*s.exports.Load())[origin]
	keyName := ""
	if t != nil {
		keyName = dns.CanonicalName(t.Hdr.Name)
	}
	if e == nil || !e.allows(from, keyName) {
		why := "no secondaries entry has this address and key"
		if e == nil {
			why = "the zone is not transferred out (no secondaries, or not served)"
		}
		log.Warn("zone transfer refused", "key", keyName, "why", why)
		s.met.transfer(origin, "out", kind, "refused")
		return refuse(w, req)
	}
	form := "axfr"
	records := 0
	count := func(yield func(dns.RR) bool) {
		e.records(func(rr dns.RR) bool {
			records++
			return yield(rr)
		})
	}
	var err error
	if kind == "ixfr" {
		var rrs []dns.RR
		ok := false
		if len(req.Ns) == 1 {
			if soa, isSOA := req.Ns[0].(*dns.SOA); isSOA {
				rrs, ok = Incremental(e.soa, soa.Serial, e.journal)
			}
		}
		switch {
		case ok && len(rrs) == 1:
			form = "up to date"
		case ok:
			form = "incremental"
		default:
			form = "axfr-style"
		}
		if ok {
			records = len(rrs)
			err = ServeIXFR(w, req, rrs)
		} else {
			err = ServeIXFRStream(w, req, count)
		}
	} else {
		err = ServeStream(w, req, count)
	}
	if err != nil {
		log.Warn("zone transfer failed", "serial", e.serial, "err", err)
		s.met.transfer(origin, "out", kind, "error")
		return err
	}
	log.Info("zone transferred out", "serial", e.serial, "form", form, "records", records, "key", keyName,
		"took", time.Since(start).Round(time.Microsecond))
	s.met.transfer(origin, "out", kind, "ok")
	return nil
}

// ignoreRefusal keeps the connection open after a refusal was sent.
func ignoreRefusal(err error) error {
	if err != nil && errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// allows reports whether a transfer request from addr signed (and
// verified) with key may have the zone: an entry must hold both.
func (e *export) allows(addr netip.Addr, key string) bool {
	if key == "" {
		return false
	}
	for _, a := range e.acl {
		if a.key == key && a.prefix.Contains(addr) {
			return true
		}
	}
	return false
}

// advertisedUDPSize is the UDP payload size the server advertises in the
// OPT of a refusal (the DNS server's own).
const advertisedUDPSize = 1232

// refuse answers REFUSED, signed when the request was, with the Extended
// DNS Error 18 (Prohibited) when it has EDNS, as the query path says it.
func refuse(w dns.ResponseWriter, req *dns.Msg) error {
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeRefused)
	if req.IsEdns0() != nil {
		m.SetEdns0(advertisedUDPSize, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited})
	}
	if t := req.IsTsig(); t != nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
	}
	return w.WriteMsg(m)
}
