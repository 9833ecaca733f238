package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/metrics"
	"github.com/steer-dns/steer/internal/secondary"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/tsig"
	"github.com/steer-dns/steer/internal/xfr"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// xfrWiring connects zone transfers to the node, in both directions:
//   - in: the secondary zones, kept by a secondary.Manager; each new copy
//     (or expiry) rebuilds the snapshot with it, and NOTIFYs from the
//     primaries reach the manager through the server;
//   - out: what each zone with secondaries exports (snapshot.Export: its
//     records and each steered name's fallback) under which serial, the
//     IXFR journal of those exports, the ACL (address and key), and the
//     NOTIFYs sent after each new serial.
//
// When what a zone exports changes but its file's serial does not (a
// steered name's fallback moved with health or the configuration), the
// zone is given the next serial, with a rebuild: secondaries only
// transfer a newer serial, and steer's own SOA must say the same serial
// its transfers carry. The serials given are kept in a state file beside
// the health state, so a restart never goes back.
type xfrWiring struct {
	n        *Node
	log      *slog.Logger
	met      *metrics.Metrics
	sec      *secondary.Manager
	notifier *xfr.Notifier

	// exports is what Transfer and Answer read: the zones transferred
	// out, by origin, replaced whole by refresh.
	exports atomic.Pointer[map[string]*export]

	mu      sync.Mutex // refresh, one at a time, and the fields below
	state   map[string]*exportState
	saved   map[string]savedSerial // as in file
	serials map[string]uint32      // serials builds give zones (snapshot.Options.Serials)
	sums    map[*zonedata.Zone][32]byte
	file    string // "" keeps none
	healthT *time.Timer
}

// export is one zone as transferred out now.
type export struct {
	serial  uint32
	rrs     []dns.RR // SOA, records, SOA
	journal *xfr.Journal
	acl     []aclEntry
}

type aclEntry struct {
	prefix netip.Prefix
	key    string // canonical key name the request must be signed with
}

// exportState is what refresh last published of a zone.
type exportState struct {
	serial  uint32
	soa     *dns.SOA
	rrs     []dns.RR
	sum     [32]byte
	journal *xfr.Journal
}

// savedSerial is a zone's last exported serial and digest, in the state
// file.
type savedSerial struct {
	Serial uint32 `json:"serial"`
	Sum    string `json:"sum"`
}

// serialsFile is the state file of exported serials, beside the health
// state file.
const serialsFile = "steer-xfr-serials.json"

func newXfr(n *Node) *xfrWiring {
	w := &xfrWiring{n: n, log: n.log, state: map[string]*exportState{}, saved: map[string]savedSerial{},
		serials: map[string]uint32{}, sums: map[*zonedata.Zone][32]byte{}}
	w.notifier = &xfr.Notifier{Result: w.notified}
	empty := map[string]*export{}
	w.exports.Store(&empty)
	return w
}

// open starts the secondary zones of cfg (their disk copies are read
// here, so the first build serves them) and reads the serials state.
func (w *xfrWiring) open(cfg *config.Config, keys map[string]tsig.Key) {
	dir := stateDir(cfg)
	if dir != "" {
		w.file = filepath.Join(dir, serialsFile)
		if data, err := os.ReadFile(w.file); err == nil {
			if err := json.Unmarshal(data, &w.saved); err != nil {
				w.log.Error("transfer serials state unreadable; exported serials restart from the zone files", "file", w.file, "err", err)
				w.saved = map[string]savedSerial{}
			}
		}
	}
	secDir := ""
	if dir != "" {
		secDir = filepath.Join(dir, "secondary")
	}
	w.sec = secondary.New(secondary.Options{
		Dir:        secDir,
		Accept:     w.accept,
		Changed:    func(origin string) { w.n.request(kindZones, "transfer of "+origin) },
		Event:      w.event,
		Log:        w.log,
		MinRefresh: 2 * time.Second, // Knot's refresh-min-interval
		Timeout:    10 * time.Second,
	})
	w.configure(cfg, keys)
}

// stateDir is where the node keeps state beside the health state file.
func stateDir(cfg *config.Config) string {
	if cfg.Health.StateFile == "" || cfg.FS != nil {
		return ""
	}
	return filepath.Dir(cfg.Resolve(cfg.Health.StateFile))
}

// configure gives the secondary manager the secondary zones of cfg.
func (w *xfrWiring) configure(cfg *config.Config, keys map[string]tsig.Key) {
	var zones []secondary.Zone
	for _, zc := range cfg.Zones {
		if !zc.Secondary() {
			continue
		}
		z := secondary.Zone{Origin: dns.CanonicalName(zc.Origin)}
		for _, p := range zc.Primaries {
			a, _ := config.PrimaryAddr(p)
			z.Primaries = append(z.Primaries, a)
		}
		if zc.TSIG != "" {
			k := keys[zc.TSIG]
			z.Key = &k
		}
		zones = append(zones, z)
	}
	if len(zones) > 0 && stateDir(cfg) == "" {
		w.log.Warn("secondary zones without health.state_file keep no copy on disk: a restart serves SERVFAIL until a primary answers")
	}
	w.sec.Set(zones)
}

// accept checks a transferred copy as a build would: it must load as a
// zone and take the steered names the configuration puts in it.
func (w *xfrWiring) accept(origin string, text []byte) error {
	z, errs, _ := zonedata.Parse(nil, origin, "transfer of "+origin, text)
	if len(errs) > 0 {
		if err := errs.Err(); err != nil {
			return err
		}
	}
	if w.n.srv == nil {
		return nil // New: the first build checks the steered names
	}
	snap := w.n.srv.Handler().Snapshot()
	if snap.Policies == nil {
		return nil
	}
	for _, r := range snap.Policies.Records {
		if snap.Zones.Find(r.Name) == nil || snap.Zones.Find(r.Name).Origin != origin {
			continue
		}
		t := uint16(dns.TypeA)
		if r.Type == dns.TypeCNAME {
			t = dns.TypeCNAME
		}
		if err := z.MarkSteered(r.Name, t); err != nil {
			return fmt.Errorf("steered record %s: %v", r.Name, err)
		}
	}
	return nil
}

// copyOf is snapshot.Options.Secondary.
func (w *xfrWiring) copyOf(origin string) snapshot.Transferred {
	c, ok := w.sec.Copy(origin)
	switch {
	case !ok:
		return snapshot.Transferred{Name: "transfer of " + origin, Unusable: "not transferred yet"}
	case c.Expired:
		return snapshot.Transferred{Name: "transfer of " + origin, Unusable: fmt.Sprintf("expired at %s: no primary confirmed serial %d", c.Expires.UTC().Format(time.RFC3339), c.Serial)}
	}
	return snapshot.Transferred{Name: "transfer of " + origin + " (serial " + fmt.Sprint(c.Serial) + " from " + c.From + ")", Data: c.Text}
}

// buildSerials returns a copy of the serials builds give zones.
func (w *xfrWiring) buildSerials() map[string]uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.serials) == 0 {
		return nil
	}
	m := make(map[string]uint32, len(w.serials))
	for k, v := range w.serials {
		m[k] = v
	}
	return m
}

// initialSerials seeds the serials of the first build from the state
// file, so a restart exports the serial it exported before.
func (w *xfrWiring) initialSerials() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for o, s := range w.saved {
		w.serials[o] = s.Serial
	}
}

// healthChanged re-exports the zones shortly after health changed: a
// steered name's fallback may have moved. Changes within 500 ms are
// taken together.
func (w *xfrWiring) healthChanged() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.healthT != nil || len(*w.exports.Load()) == 0 {
		return
	}
	w.healthT = time.AfterFunc(500*time.Millisecond, func() {
		w.mu.Lock()
		w.healthT = nil
		w.mu.Unlock()
		w.refresh()
	})
}

// nextSerial decides the serial to export a zone with: the file's when it
// is newer than the last exported, the last exported while the content
// is the same, else the one after it.
func nextSerial(file uint32, last *savedSerial, sum string) uint32 {
	switch {
	case last == nil || xfr.SerialNewer(file, last.Serial):
		return file
	case last.Sum == sum:
		return last.Serial
	}
	if s := last.Serial + 1; s != 0 {
		return s
	}
	return 1
}

// refresh recomputes what each zone with secondaries exports from the
// served snapshot, publishes it, journals the change and notifies the
// secondaries of a new serial; a zone whose export needs a new serial
// gets it through a rebuild, and is published (and notified) after it.
func (w *xfrWiring) refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	snap := w.n.srv.Handler().Snapshot()
	cur := *w.exports.Load()
	next := map[string]*export{}
	rebuild := false
	changed := false
	live := map[*zonedata.Zone]bool{}
	type notice struct {
		origin  string
		soa     *dns.SOA
		targets []xfr.Target
	}
	var notices []notice
	for _, zc := range snap.Config.Zones {
		if len(zc.Secondaries) == 0 {
			continue
		}
		origin := dns.CanonicalName(zc.Origin)
		z := snap.Zones.Zone(origin)
		if z == nil || z.Failed != "" || z.SOA == nil {
			continue // SERVFAIL: nothing to transfer
		}
		live[z] = true
		sum := w.sum(snap, z)
		hexSum := hex.EncodeToString(sum[:])
		var last *savedSerial
		st := w.state[origin]
		if st != nil {
			last = &savedSerial{Serial: st.serial, Sum: hex.EncodeToString(st.sum[:])}
		} else if s, ok := w.saved[origin]; ok {
			last = &s
		}
		target := nextSerial(z.FileSerial(), last, hexSum)
		if target != z.Serial() {
			if w.serials[origin] != target {
				w.serials[origin] = target
				rebuild = true
				w.log.Info("zone transfers: what the zone exports changed without a new serial in its file; giving it the next one",
					"zone", origin, "file_serial", z.FileSerial(), "serial", target)
			}
			if e := cur[origin]; e != nil {
				next[origin] = e // the last consistent export serves meanwhile
			}
			continue
		}
		if target == z.FileSerial() {
			delete(w.serials, origin)
		} else {
			w.serials[origin] = target
		}
		var rrs []dns.RR
		if st != nil && st.serial == target && st.sum == sum {
			// Nothing it exports changed (a health change elsewhere, a
			// reload of another zone): the export is kept, not rebuilt,
			// so this costs the fallbacks' digest, not the zone's size.
			rrs = st.rrs
		} else {
			rrs = snap.Export(origin)
		}
		notify := false
		switch {
		case st == nil:
			st = &exportState{}
			if n := zc.Journal(); n > 0 {
				st.journal = xfr.NewJournal(n)
			}
			w.state[origin] = st
			notify = true // as BIND and Knot do at start-up
		case st.serial != target:
			if st.journal != nil {
				del, add := xfr.Diff(st.rrs[:len(st.rrs)-1], rrs[:len(rrs)-1])
				st.journal.Add(xfr.Delta{From: st.soa, To: z.SOA, Del: del, Add: add})
			}
			notify = true
			w.log.Info("zone transfers: new serial", "zone", origin, "from", st.serial, "to", target)
		}
		st.serial, st.soa, st.rrs, st.sum = target, z.SOA, rrs, sum
		if s := (savedSerial{Serial: target, Sum: hexSum}); w.saved[origin] != s {
			w.saved[origin] = s
			changed = true
		}
		e := &export{serial: target, rrs: rrs, journal: st.journal}
		var targets []xfr.Target
		for _, s := range zc.Secondaries {
			k := snap.TSIG[s.TSIG]
			e.acl = append(e.acl, aclEntry{prefix: s.Prefix(), key: k.Name})
			if a := s.NotifyAddr(); a != "" {
				key := k
				targets = append(targets, xfr.Target{Addr: a, Key: &key})
			}
		}
		next[origin] = e
		if notify && len(targets) > 0 {
			notices = append(notices, notice{origin, z.SOA, targets})
		}
	}
	for o := range w.state {
		if next[o] == nil && snap.Zones.Zone(o) == nil {
			delete(w.state, o) // no longer served
		}
	}
	for z := range w.sums {
		if !live[z] {
			delete(w.sums, z)
		}
	}
	w.exports.Store(&next)
	// Only now: a secondary that asks at once must find the new serial.
	for _, n := range notices {
		w.notifier.Send(n.origin, n.soa, n.targets)
	}
	if changed {
		w.save()
	}
	if rebuild {
		w.n.request(kindZones, "zone serial")
	}
}

// sum digests what z exports: its records (the SOA without its serial)
// and its steered names' fallbacks. The zone's part is kept per zone, which
// never changes; the fallbacks are few and digested each time.
func (w *xfrWiring) sum(snap *snapshot.Snapshot, z *zonedata.Zone) [32]byte {
	zs, ok := w.sums[z]
	if !ok {
		h := sha256.New()
		soa := dns.Copy(z.SOA).(*dns.SOA)
		soa.Serial = 0
		fmt.Fprintln(h, soa.String())
		rrs := z.AppendRecords(nil)
		for _, rr := range rrs[1:] {
			fmt.Fprintln(h, rr.String())
		}
		copy(zs[:], h.Sum(nil))
		w.sums[z] = zs
	}
	h := sha256.New()
	h.Write(zs[:])
	var lines []string
	for _, r := range snap.Steered(z) {
		for _, rr := range snap.Fallback(r) {
			lines = append(lines, rr.String())
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// save writes the exported serials atomically.
func (w *xfrWiring) save() {
	if w.file == "" {
		return
	}
	data, _ := json.MarshalIndent(w.saved, "", "  ")
	tmp := w.file + ".tmp"
	err := os.WriteFile(tmp, append(data, '\n'), 0o644)
	if err == nil {
		err = os.Rename(tmp, w.file)
	}
	if err != nil {
		w.log.Error("cannot keep the exported zone serials; a restart may export an older serial", "file", w.file, "err", err)
	}
}

// Transfer implements dnsserver.Transfers: an AXFR or IXFR out.
func (w *xfrWiring) Transfer(c net.Conn, req []byte) error {
	start := time.Now()
	snap := w.n.srv.Handler().Snapshot()
	rw, msg, err := xfr.NewConnWriter(c, req, secrets(snap))
	if err != nil {
		return err
	}
	q := msg.Question[0]
	origin := dns.CanonicalName(q.Name)
	kind := "axfr"
	if q.Qtype == dns.TypeIXFR {
		kind = "ixfr"
	}
	from := addrOf(c.RemoteAddr())
	c.SetWriteDeadline(time.Now().Add(5 * time.Minute))
	defer c.SetWriteDeadline(time.Time{})
	log := w.log.With("zone", origin, "type", kind, "to", from.String())
	t := msg.IsTsig()
	if t != nil && rw.TsigStatus() != nil {
		// Serve answers NOTAUTH with the TSIG error (RFC 8945 §5.2).
		log.Warn("zone transfer refused: TSIG did not verify", "key", t.Hdr.Name, "err", rw.TsigStatus())
		w.met.Transfer(origin, "out", kind, "tsig")
		if kind == "ixfr" {
			return ignoreRefusal(xfr.ServeIXFR(rw, msg, nil))
		}
		return ignoreRefusal(xfr.Serve(rw, msg, nil))
	}
	e := (*w.exports.Load())[origin]
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
		w.met.Transfer(origin, "out", kind, "refused")
		return refuse(rw, msg)
	}
	rrs := e.rrs
	form := "axfr"
	if kind == "ixfr" {
		if len(msg.Ns) == 1 {
			if soa, ok := msg.Ns[0].(*dns.SOA); ok {
				rrs = xfr.IXFR(e.rrs[:len(e.rrs)-1], soa.Serial, e.journal)
				switch {
				case len(rrs) == 1:
					form = "up to date"
				case len(rrs) > 1 && rrs[1].Header().Rrtype == dns.TypeSOA:
					form = "incremental"
				default:
					form = "axfr-style"
				}
			}
		}
		err = xfr.ServeIXFR(rw, msg, rrs)
	} else {
		err = xfr.Serve(rw, msg, e.rrs)
	}
	if err != nil {
		log.Warn("zone transfer failed", "serial", e.serial, "err", err)
		w.met.Transfer(origin, "out", kind, "error")
		return err
	}
	log.Info("zone transferred out", "serial", e.serial, "form", form, "records", len(rrs), "key", keyName,
		"took", time.Since(start).Round(time.Microsecond))
	w.met.Transfer(origin, "out", kind, "ok")
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

// refuse answers REFUSED, signed when the request was.
func refuse(rw dns.ResponseWriter, req *dns.Msg) error {
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeRefused)
	if req.IsEdns0() != nil {
		m.SetEdns0(dnsserver.AdvertisedUDPSize, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited})
	}
	if t := req.IsTsig(); t != nil {
		m.SetTsig(t.Hdr.Name, t.Algorithm, t.Fudge, time.Now().Unix())
	}
	return rw.WriteMsg(m)
}

func secrets(snap *snapshot.Snapshot) map[string]string {
	keys := make([]tsig.Key, 0, len(snap.TSIG))
	for _, k := range snap.TSIG {
		keys = append(keys, k)
	}
	return tsig.Secrets(keys)
}

func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort().Addr().Unmap()
	}
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Answer implements dnsserver.Transfers: a NOTIFY from a primary, or an
// IXFR over UDP.
func (w *xfrWiring) Answer(req []byte, from netip.Addr, t dnsserver.Transport) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil || len(m.Question) != 1 {
		return nil // the server's own FORMERR/NOTIMP
	}
	from = from.Unmap()
	snap := w.n.srv.Handler().Snapshot()
	origin := dns.CanonicalName(m.Question[0].Name)
	var secret string
	tsigRR := m.IsTsig()
	if tsigRR != nil {
		secret = secrets(snap)[dns.CanonicalName(tsigRR.Hdr.Name)]
	}
	var verr error
	switch {
	case tsigRR == nil:
	case secret == "":
		verr = dns.ErrSecret
	default:
		verr = dns.TsigVerify(req, secret, "", false)
	}
	verified := tsigRR != nil && verr == nil
	reply := new(dns.Msg)
	reply.SetReply(m)
	reply.Authoritative = true
	sign := func() []byte {
		if verified {
			reply.SetTsig(tsigRR.Hdr.Name, tsigRR.Algorithm, tsigRR.Fudge, time.Now().Unix())
			out, _, err := dns.TsigGenerate(reply, secret, tsigRR.MAC, false)
			if err == nil {
				return out
			}
		}
		out, _ := reply.Pack()
		return out
	}
	if tsigRR != nil && !verified {
		w.log.Warn("signed message refused: TSIG did not verify", "opcode", dns.OpcodeToString[m.Opcode], "zone", origin,
			"from", from.String(), "key", tsigRR.Hdr.Name, "err", verr)
		if m.Opcode == dns.OpcodeNotify {
			w.met.Notify(origin, "received", "tsig")
		}
		return tsigFailure(m, tsigRR, verr)
	}
	if m.Opcode == dns.OpcodeNotify {
		zc := zoneConfig(snap.Config, origin)
		log := w.log.With("zone", origin, "from", from.String())
		switch {
		case zc == nil || !zc.Secondary():
			log.Warn("NOTIFY refused: not a secondary zone here")
			w.met.Notify(origin, "received", "refused")
			reply.Rcode = dns.RcodeNotAuth
		case zc.TSIG != "" && !verified:
			why := "unsigned"
			if tsigRR != nil {
				why = "TSIG did not verify (key " + tsigRR.Hdr.Name + ")"
			}
			log.Warn("NOTIFY refused: the zone's key is required", "key", zc.TSIG, "why", why)
			w.met.Notify(origin, "received", "tsig")
			reply.Rcode = dns.RcodeNotAuth
		case zc.TSIG != "" && dns.CanonicalName(tsigRR.Hdr.Name) != snap.TSIG[zc.TSIG].Name:
			log.Warn("NOTIFY refused: signed with another key", "key", tsigRR.Hdr.Name, "want", zc.TSIG)
			w.met.Notify(origin, "received", "tsig")
			reply.Rcode = dns.RcodeNotAuth
		case !w.sec.Notify(origin, from):
			log.Warn("NOTIFY refused: not from one of the zone's primaries")
			w.met.Notify(origin, "received", "refused")
			reply.Rcode = dns.RcodeRefused
		default:
			serial := ""
			if len(m.Answer) > 0 {
				if soa, ok := m.Answer[0].(*dns.SOA); ok {
					serial = fmt.Sprint(soa.Serial)
				}
			}
			log.Info("NOTIFY received; refreshing the zone", "serial", serial)
			w.met.Notify(origin, "received", "ok")
		}
		return sign()
	}
	if m.Opcode != dns.OpcodeQuery {
		return nil
	}
	if m.Question[0].Qtype != dns.TypeIXFR || t != dnsserver.UDP {
		if tsigRR == nil {
			return nil
		}
		// Any other signed query (a secondary's SOA check): the answer
		// the query would get unsigned, signed with its key.
		m.Extra = m.Extra[:len(m.Extra)-1]
		plain, err := m.Pack()
		if err != nil {
			return nil
		}
		out := w.n.srv.Handler().Unsigned(plain, t, from)
		if out == nil || reply.Unpack(out) != nil {
			return nil
		}
		return sign()
	}
	// IXFR over UDP (RFC 1995 §2): the current SOA, so that a client
	// behind tells it must come over TCP, and one up to date is done.
	e := (*w.exports.Load())[origin]
	key := ""
	if verified {
		key = dns.CanonicalName(tsigRR.Hdr.Name)
	}
	if e == nil || !e.allows(from, key) {
		w.met.Transfer(origin, "out", "ixfr", "refused")
		reply.Rcode = dns.RcodeRefused
		return sign()
	}
	reply.Answer = []dns.RR{e.rrs[0]}
	w.met.Transfer(origin, "out", "ixfr", "ok")
	return sign()
}

// tsigFailure answers a request whose TSIG did not verify: NOTAUTH with
// the TSIG error, unsigned (RFC 8945 §5.2).
func tsigFailure(m *dns.Msg, _ *dns.TSIG, err error) []byte {
	out, _ := tsig.ErrorReply(m, err).Pack()
	return out
}

func zoneConfig(cfg *config.Config, origin string) *config.Zone {
	for i := range cfg.Zones {
		if dns.CanonicalName(cfg.Zones[i].Origin) == origin {
			return &cfg.Zones[i]
		}
	}
	return nil
}

// event counts a secondary zone's transfer or refresh check.
func (w *xfrWiring) event(origin, kind, result string) {
	if w.met == nil {
		return
	}
	if kind == "notify" {
		return // counted where it is answered
	}
	w.met.Transfer(origin, "in", kind, result)
}

// notified logs and counts a NOTIFY sent.
func (w *xfrWiring) notified(zone string, t xfr.Target, serial uint32, err error) {
	result := "ok"
	if err != nil {
		result = "error"
		var rc *xfr.RcodeError
		switch {
		case errors.As(err, &rc) && rc.TsigError != 0:
			result = "tsig"
		case errors.As(err, &rc):
			result = "refused"
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			result = "timeout"
		}
		w.log.Warn("NOTIFY not acknowledged", "zone", zone, "to", t.Addr, "serial", serial, "err", err)
	} else {
		w.log.Info("NOTIFY acknowledged", "zone", zone, "to", t.Addr, "serial", serial)
	}
	if w.met != nil {
		w.met.Notify(zone, "sent", result)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// zoneStates is what the zone gauges show.
func (w *xfrWiring) zoneStates() []metrics.ZoneTransferState {
	snap := w.n.srv.Handler().Snapshot()
	var out []metrics.ZoneTransferState
	copies := map[string]secondary.Status{}
	for _, s := range w.sec.Status() {
		copies[s.Origin] = s
	}
	now := time.Now()
	for _, z := range snap.Zones.Zones() {
		st := metrics.ZoneTransferState{Zone: z.Origin, Serial: z.Serial(), Secondary: snap.Secondaries[z.Origin]}
		if c, ok := copies[z.Origin]; ok && c.HaveCopy {
			st.HasCopy = true
			st.ExpiresIn = c.Expires.Sub(now).Seconds()
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b metrics.ZoneTransferState) int {
		switch {
		case a.Zone < b.Zone:
			return -1
		case a.Zone > b.Zone:
			return 1
		}
		return 0
	})
	return out
}

// status is a zone's transfer state for /v1/status (nil: none).
func (w *xfrWiring) status(snap *snapshot.Snapshot, z *zonedata.Zone) *api.ZoneTransfer {
	zc := zoneConfig(snap.Config, z.Origin)
	if zc == nil || (!zc.Secondary() && len(zc.Secondaries) == 0) {
		return nil
	}
	zt := &api.ZoneTransfer{Secondaries: len(zc.Secondaries)}
	if zc.Secondary() {
		zt.Primaries = append(zt.Primaries, zc.Primaries...)
		for _, s := range w.sec.Status() {
			if s.Origin == z.Origin {
				zt.Primary, zt.LastTransfer, zt.Refreshed, zt.NextRefresh = s.Primary, s.LastTransfer, s.Refreshed, s.NextRefresh
				zt.Expires, zt.Expired, zt.LastError = s.Expires, s.Expired, s.LastError
			}
		}
	}
	if e := (*w.exports.Load())[z.Origin]; e != nil {
		zt.ExportedSerial = e.serial
		if e.journal != nil {
			zt.Journal = e.journal.Len()
		}
		if fs := z.FileSerial(); fs != z.Serial() {
			zt.FileSerial = fs
		}
	}
	return zt
}

func (w *xfrWiring) close() {
	w.mu.Lock()
	if w.healthT != nil {
		w.healthT.Stop()
	}
	w.mu.Unlock()
	w.sec.Close()
	w.notifier.Close()
}

var _ dnsserver.Transfers = (*xfrWiring)(nil)
