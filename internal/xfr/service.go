package xfr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/secondary"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// Service is zone transfers as a server runs them, in both directions:
//
//   - out (export.go): what each zone with secondaries exports (its
//     records and each steered name's fallback) under which serial, the
//     IXFR journal of those exports, who may transfer it (address and
//     key), and the NOTIFYs sent after each new serial;
//   - in: the secondary zones, kept by a secondary.Manager, and the
//     NOTIFYs their primaries send.
//
// It holds no snapshot and no server: Options.Zones gives it the zones
// served now as plain data (Zone), and it asks for a rebuild through
// Options.Rebuild when a new copy came in or a zone needs a new serial.
// The DNS server hands it transfer requests and NOTIFYs with their TSIG
// already verified (Transfer, Answer, Refused).
type Service struct {
	o        Options
	log      *slog.Logger
	met      *collectors
	sec      *secondary.Manager
	notifier *Notifier

	// exports is what Transfer and Answer read: the zones transferred
	// out, by origin, replaced whole by Refresh.
	exports atomic.Pointer[map[string]*export]
	// served is what the zone gauges read: every zone served, as the
	// last Refresh saw it.
	served atomic.Pointer[[]servedZone]
	// in holds the secondary zones, by origin (SetIn).
	in atomic.Pointer[map[string]secondary.Zone]

	mu      sync.Mutex // Refresh, one at a time, and the fields below
	state   map[string]*exportState
	saved   map[string]savedSerial // as in file
	serials map[string]uint32      // serials builds give zones (Serials)
	sums    map[any][32]byte       // the digest of each Zone.Version's records
	file    string                 // "" keeps none
	healthT *time.Timer
	agreed  map[string]savedSerial // the fleet's serials for this node's exports (agree)
	behind  map[string]uint32      // a Fixed zone's serial said to be behind the last exported
	// agreeFailed is when an agreement last failed (agreeBackoff).
	agreeFailed time.Time
}

// Agreement agrees the serials of exported zones across a fleet, so that
// every node exports the same content under the same serial (a node
// alone decides its own: Options.Agreement nil). Contents are named by
// their digest.
type Agreement interface {
	// Agree returns the serial the fleet gives content sum of zone
	// origin, which this node would give proposed (never older than
	// what it exported before, nor than the zone file's serial): the
	// fleet's serial when it agreed this content last, else the next
	// one after the fleet's last (or proposed, when newer), agreed with
	// one compare-and-swap. It blocks for the round trip and fails when
	// the fleet cannot be reached.
	Agree(origin, sum string, proposed uint32) (uint32, error)
	// Agreed returns the serial and content the fleet agreed last for
	// origin, as followed (no round trip); ok false when none is known.
	Agreed(origin string) (serial uint32, sum string, ok bool)
}

// Options configure a Service.
type Options struct {
	Log *slog.Logger
	// Registerer receives the service's collectors (nil: none): the
	// counters steer_zone_transfers_total and steer_notify_total and the
	// gauges steer_zone_serial and steer_zone_expires_in_seconds.
	Registerer prometheus.Registerer
	// Dir keeps the exported serials (SerialsFile) and, under
	// "secondary", the last good copy of each secondary zone; "" keeps
	// neither.
	Dir string
	// Zones returns the zones served now. Refresh and a health change
	// read it.
	Zones func() []Zone
	// Rebuild asks for the served zones to be built again: a secondary
	// zone has a new copy (or expired), or a zone needs the next serial
	// to export. The caller then builds with Copy and Serials, and calls
	// Refresh once the new zones are served.
	Rebuild func(why string)
	// Steered returns the names the configuration steers in the zone
	// origin, with their type (A for an address record, or CNAME): a copy
	// transferred in must take them. nil: none.
	Steered func(origin string) map[string]uint16
	// Agreement, in a fleet, agrees each new export's serial with the
	// other nodes (nil: this node decides alone). Call HealthChanged when
	// the fleet's agreed serials change.
	Agreement Agreement
	// MinRefresh and Timeout are the secondary.Manager's; 0: 2 s (Knot's
	// refresh-min-interval) and 10 s.
	MinRefresh, Timeout time.Duration
	// Limits bound the transfers in (secondary.Limits; SetTransfers
	// changes them), NotifySource is the local address of the NOTIFYs
	// sent (notify_source; the zero Addr: any).
	Limits       secondary.Limits
	NotifySource netip.Addr
}

// SerialsFile is the state file of exported serials in Options.Dir (the
// node's state directory, config.StateSerials).
const SerialsFile = "xfr-serials.json"

// SecondaryDir is the directory of secondary copies in Options.Dir
// (config.StateSecondary).
const SecondaryDir = "secondary"

// New returns a Service with no zones: SetIn gives it its secondary
// zones, Refresh its exports. The exported serials are read from
// Options.Dir, so the first build (Serials) exports the serial exported
// before a restart.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MinRefresh <= 0 {
		o.MinRefresh = 2 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	s := &Service{o: o, log: o.Log, state: map[string]*exportState{}, saved: map[string]savedSerial{},
		serials: map[string]uint32{}, sums: map[any][32]byte{}, agreed: map[string]savedSerial{}, behind: map[string]uint32{}}
	s.met = newCollectors(s)
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.met)
	}
	s.notifier = &Notifier{Result: s.notified, Source: o.NotifySource}
	empty := map[string]*export{}
	s.exports.Store(&empty)
	noZones := []servedZone{}
	s.served.Store(&noZones)
	noIn := map[string]secondary.Zone{}
	s.in.Store(&noIn)
	secDir := ""
	if o.Dir != "" {
		s.file = filepath.Join(o.Dir, SerialsFile)
		if data, err := os.ReadFile(s.file); err == nil {
			if err := json.Unmarshal(data, &s.saved); err != nil {
				s.log.Error("transfer serials state unreadable; exported serials restart from the zone files", "file", s.file, "err", err)
				s.saved = map[string]savedSerial{}
			}
		}
		for origin, sv := range s.saved {
			s.serials[origin] = sv.Serial
		}
		secDir = filepath.Join(o.Dir, SecondaryDir)
	}
	s.sec = secondary.New(secondary.Options{
		Dir:    secDir,
		Accept: s.accept,
		Changed: func(origin string) {
			if o.Rebuild != nil {
				o.Rebuild("transfer of " + origin)
			}
		},
		Event:      s.event,
		Log:        s.log,
		MinRefresh: o.MinRefresh,
		Timeout:    o.Timeout,
		Limits:     o.Limits,
	})
	return s
}

// SetTransfers changes the limits of transfers in and the address
// NOTIFYs are sent from (a reload).
func (s *Service) SetTransfers(l secondary.Limits, notifySource netip.Addr) {
	s.sec.SetLimits(l)
	s.notifier.SetSource(notifySource)
}

// SetIn sets the secondary zones (their disk copies are read here, so a
// build that follows serves them).
func (s *Service) SetIn(zones []secondary.Zone) {
	m := make(map[string]secondary.Zone, len(zones))
	for _, z := range zones {
		m[z.Origin] = z
	}
	s.in.Store(&m)
	if len(zones) > 0 && s.o.Dir == "" {
		s.log.Warn("secondary zones without a state directory keep no copy on disk: a restart serves SERVFAIL until a primary answers")
	}
	s.sec.Set(zones)
}

// Copy is the copy of a secondary zone to serve: name names it in
// messages; data is the zone as master-file text, nil when there is none
// to serve, unusable then saying why.
func (s *Service) Copy(origin string) (name string, data []byte, unusable string) {
	c, ok := s.sec.Copy(origin)
	switch {
	case !ok:
		return "transfer of " + origin, nil, "not transferred yet"
	case c.Expired:
		return "transfer of " + origin, nil, fmt.Sprintf("expired at %s: no primary confirmed serial %d", c.Expires.UTC().Format(time.RFC3339), c.Serial)
	}
	return "transfer of " + origin + " (serial " + fmt.Sprint(c.Serial) + " from " + c.From + ")", c.Text, ""
}

// RefreshIn checks a secondary zone's primaries now; false when origin is
// not a secondary zone here.
func (s *Service) RefreshIn(origin string) bool { return s.sec.Refresh(dns.CanonicalName(origin)) }

// accept checks a transferred copy as a build would: it must load as a
// zone and take the steered names the configuration puts in it.
func (s *Service) accept(origin string, text []byte) error {
	z, errs, _ := zonedata.Parse(nil, origin, "transfer of "+origin, text)
	if len(errs) > 0 {
		if err := errs.Err(); err != nil {
			return err
		}
	}
	if s.o.Steered == nil {
		return nil
	}
	for name, t := range s.o.Steered(origin) {
		if err := z.MarkSteered(name, t); err != nil {
			return fmt.Errorf("steered record %s: %v", name, err)
		}
	}
	return nil
}

// ZoneStatus is a zone's transfer state, for the admin API.
type ZoneStatus struct {
	// In: the secondary manager's state (when the zone is a secondary).
	In *secondary.Status
	// Exported says the zone is transferred out now, under
	// ExportedSerial, with Journal deltas kept for IXFR.
	Exported       bool
	ExportedSerial uint32
	Journal        int
}

// Status returns the transfer state of the zone origin.
func (s *Service) Status(origin string) ZoneStatus {
	var st ZoneStatus
	if _, ok := (*s.in.Load())[origin]; ok {
		for _, c := range s.sec.Status() {
			if c.Origin == origin {
				st.In = &c
			}
		}
	}
	if e := (*s.exports.Load())[origin]; e != nil {
		st.Exported, st.ExportedSerial = true, e.serial
		if e.journal != nil {
			st.Journal = e.journal.Len()
		}
	}
	return st
}

// Answer answers, for the DNS server, a NOTIFY from a primary (RFC 1996)
// or an IXFR request over UDP (RFC 1995 §2), req without its TSIG record:
// key is the canonical name of the key it was signed with and that
// verified ("" for an unsigned request). The server signs the reply with
// that key. nil leaves the request to the server's own answer.
func (s *Service) Answer(req *dns.Msg, from netip.Addr, key string) *dns.Msg {
	if len(req.Question) != 1 {
		return nil
	}
	from = from.Unmap()
	reply := new(dns.Msg)
	reply.SetReply(req)
	reply.Authoritative = true
	origin := dns.CanonicalName(req.Question[0].Name)
	switch {
	case req.Opcode == dns.OpcodeNotify:
		reply.Rcode = s.notifyIn(req, origin, from, key)
	case req.Opcode == dns.OpcodeQuery && req.Question[0].Qtype == dns.TypeIXFR:
		// The current SOA, so that a client behind tells it must come
		// over TCP, and one up to date is done.
		e := (*s.exports.Load())[origin]
		if e == nil || !e.allows(from, key) {
			s.met.transfer(origin, "out", "ixfr", "refused")
			reply.Rcode = dns.RcodeRefused
			return reply
		}
		reply.Answer = []dns.RR{e.soa}
		s.met.transfer(origin, "out", "ixfr", "ok")
	default:
		return nil
	}
	return reply
}

// notifyIn decides the rcode of a NOTIFY for origin and starts the
// zone's refresh when it is accepted.
func (s *Service) notifyIn(req *dns.Msg, origin string, from netip.Addr, key string) int {
	z, ok := (*s.in.Load())[origin]
	log := s.log.With("zone", origin, "from", from.String())
	switch {
	case !ok:
		log.Warn("NOTIFY refused: not a secondary zone here")
		s.met.notify(origin, "received", "refused")
		return dns.RcodeNotAuth
	case z.Key != nil && key == "":
		log.Warn("NOTIFY refused: the zone's key is required", "key", z.Key.Name, "why", "unsigned")
		s.met.notify(origin, "received", "tsig")
		return dns.RcodeNotAuth
	case z.Key != nil && key != z.Key.Name:
		log.Warn("NOTIFY refused: signed with another key", "key", key, "want", z.Key.Name)
		s.met.notify(origin, "received", "tsig")
		return dns.RcodeNotAuth
	case !s.sec.Notify(origin, from):
		log.Warn("NOTIFY refused: not from one of the zone's primaries")
		s.met.notify(origin, "received", "refused")
		return dns.RcodeRefused
	}
	serial := ""
	if len(req.Answer) > 0 {
		if soa, ok := req.Answer[0].(*dns.SOA); ok {
			serial = fmt.Sprint(soa.Serial)
		}
	}
	log.Info("NOTIFY received; refreshing the zone", "serial", serial)
	s.met.notify(origin, "received", "ok")
	return dns.RcodeSuccess
}

// Refused is told by the DNS server of a signed request whose TSIG did
// not verify (the server answers it NOTAUTH with the TSIG error), for the
// log and the NOTIFY counts.
func (s *Service) Refused(req *dns.Msg, from netip.Addr, err error) {
	origin := ""
	if len(req.Question) > 0 {
		origin = dns.CanonicalName(req.Question[0].Name)
	}
	key := ""
	if t := req.IsTsig(); t != nil {
		key = t.Hdr.Name
	}
	s.log.Warn("signed message refused: TSIG did not verify", "opcode", dns.OpcodeToString[req.Opcode], "zone", origin,
		"from", from.Unmap().String(), "key", key, "err", err)
	if req.Opcode == dns.OpcodeNotify {
		s.met.notify(origin, "received", "tsig")
	}
}

// event counts a secondary zone's transfer or refresh check.
func (s *Service) event(origin, kind, result string) {
	if kind == "notify" {
		return // counted where it is answered
	}
	s.met.transfer(origin, "in", kind, result)
}

// notified logs and counts a NOTIFY sent.
func (s *Service) notified(zone string, t Target, serial uint32, err error) {
	result := "ok"
	if err != nil {
		result = "error"
		var rc *RcodeError
		var ne net.Error
		switch {
		case errors.As(err, &rc) && rc.TsigError != 0:
			result = "tsig"
		case errors.As(err, &rc):
			result = "refused"
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			result = "timeout"
		}
		s.log.Warn("NOTIFY not acknowledged", "zone", zone, "to", t.Addr, "serial", serial, "err", err)
	} else {
		s.log.Info("NOTIFY acknowledged", "zone", zone, "to", t.Addr, "serial", serial)
	}
	s.met.notify(zone, "sent", result)
}

// Close stops the secondary zones' refreshes and the NOTIFYs in flight.
func (s *Service) Close() {
	s.mu.Lock()
	if s.healthT != nil {
		s.healthT.Stop()
	}
	s.mu.Unlock()
	s.sec.Close()
	s.notifier.Close()
}
