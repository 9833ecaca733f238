package node

import (
	"log/slog"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/dnsserver"
	"github.com/steer-dns/steer/internal/secondary"
	"github.com/steer-dns/steer/internal/snapshot"
	"github.com/steer-dns/steer/internal/tsig"
	"github.com/steer-dns/steer/internal/xfr"
	zonedata "github.com/steer-dns/steer/internal/zone"
)

// xfrWiring connects the zone transfer service (xfr.Service: transfers
// out and in, NOTIFY, the exported serials, their metrics) to the node.
// The service reads the zones served through xfrZones, from the current
// snapshot, and asks for a rebuild through request; the DNS server hands
// it transfer requests and NOTIFYs (dnsserver.Transfers), and builds take
// its copies and serials (copyOf, Serials).
type xfrWiring struct {
	*xfr.Service
	log *slog.Logger

	// mu guards the signed exports: the service may ask for the zones
	// from several goroutines (a reload, a health change, the renewal
	// timer).
	mu sync.Mutex
	// signed holds the last signed export of each signed zone with
	// secondaries: reused while its zone and fallbacks are the same and
	// its own signatures fresh, and the source of the signatures the
	// next one keeps.
	signed map[string]*snapshot.SignedExport
	// renew is the timer that builds the signed exports again when
	// their first own signature is due (nil: none set).
	renew   *time.Timer
	renewAt time.Time
	closed  bool
}

// Close stops the renewal timer of the signed exports, then the service.
func (w *xfrWiring) Close() {
	w.mu.Lock()
	w.closed = true
	if w.renew != nil {
		w.renew.Stop()
	}
	w.mu.Unlock()
	w.Service.Close()
}

// dir is the state directory ("": keep nothing); ag agrees exported
// serials with the fleet (nil: not in a fleet).
func newXfr(log *slog.Logger, reg prometheus.Registerer, dir string, ag xfr.Agreement, current func() *snapshot.Snapshot, request func(why string)) *xfrWiring {
	w := &xfrWiring{log: log, signed: map[string]*snapshot.SignedExport{}}
	w.Service = xfr.New(xfr.Options{
		Log:        log,
		Registerer: reg,
		Dir:        dir,
		Agreement:  ag,
		Zones:      func() []xfr.Zone { return w.zones(current()) },
		Rebuild:    request,
		Steered: func(origin string) map[string]uint16 {
			if snap := current(); snap != nil {
				return steeredIn(snap, origin)
			}
			return nil // New: the first build checks the steered names
		},
	})
	return w
}

// configure gives the service the transfers settings and the secondary
// zones of cfg.
func (w *xfrWiring) configure(cfg *config.Config, keys map[string]tsig.Key) {
	t := &cfg.Transfers
	ts, ns := t.SourceAddrs()
	w.SetTransfers(secondary.Limits{IdleTimeout: time.Duration(t.IdleTimeoutIn),
		MaxTransferTime: time.Duration(t.MaxTransferTimeIn), TransfersIn: t.TransfersIn, Source: ts}, ns)
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
	w.SetIn(zones)
}

// refresh re-exports the zones served now (after a swap).
func (w *xfrWiring) refresh() { w.Refresh() }

// copyOf is snapshot.Options.Secondary.
func (w *xfrWiring) copyOf(origin string) snapshot.Transferred {
	name, data, unusable := w.Copy(origin)
	return snapshot.Transferred{Name: name, Data: data, Unusable: unusable}
}

// zones is what the service sees of snap (xfrZones), a signed zone's
// export being its signed export (signedExport).
func (w *xfrWiring) zones(snap *snapshot.Snapshot) []xfr.Zone {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	live := map[string]bool{}
	out := xfrZones(snap, func(xz *xfr.Zone, z *zonedata.Zone) bool {
		live[z.Origin] = true
		return w.signedExport(snap, xz, z, now)
	})
	for o := range w.signed {
		if !live[o] {
			delete(w.signed, o)
		}
	}
	w.scheduleRenewal(now)
	return out
}

// signedExport makes xz, the export of the signed zone z, its signed
// export: every record with its signatures, the steered names'
// fallbacks signed, the denial chain. The previous export is reused
// while it is still the export of z (a Refresh after a health change
// that moved nothing). It reports false when the export cannot be
// built (said in the log): the zone is then not transferred until it
// can be, and the secondaries keep the copy they have.
func (w *xfrWiring) signedExport(snap *snapshot.Snapshot, xz *xfr.Zone, z *zonedata.Zone, now time.Time) bool {
	if z.Presigned() {
		return w.signerExport(xz, z, now)
	}
	prev := w.signed[z.Origin]
	e := prev
	if !prev.Reusable(z, xz.Fallbacks, now) {
		start := time.Now()
		var err error
		e, err = snapshot.BuildSignedExport(z, xz.Fallbacks, snap.Denial(z.Origin), prev, now)
		if err != nil {
			w.log.Error("zone transfers: cannot build the signed export; the secondaries keep what they have", "zone", z.Origin, "err", err)
			return false
		}
		w.log.Debug("zone transfers: signed export built", "zone", z.Origin, "records", len(e.RRs),
			"signatures_made", e.Made, "signatures_kept", e.Kept, "took", time.Since(start).Round(time.Microsecond))
		w.signed[z.Origin] = e
	}
	rrs := e.RRs
	// Version is the export itself: one export, one digest. Its
	// fallbacks are in its records, signed.
	xz.Version, xz.Fallbacks, xz.Each = e, nil, nil
	xz.SigPeriod = exportSigPeriod(z.Signer().Options())
	xz.Records = func(dst []dns.RR) []dns.RR { return append(dst, rrs...) }
	return true
}

// signerExport makes xz, the export of z, a zone signed elsewhere, what
// its secondaries validate on their own: the signer's zone as it came
// in, with its serial (Fixed: the SOA is the signer's, signed by it);
// for a multi-signer zone, the steered names' fallbacks signed with
// steer's ZSK in place of the signer's stand-ins (BuildSignerExport).
// A zone whose steered names are unsteered (steer's ZSK is not
// published: zone.Unsteer) and a pre-signed zone without steered names
// export nothing else: their stand-ins, signed by the signer, are what
// validates. It reports false when the export cannot be built (said in
// the log): the secondaries then keep what they have.
func (w *xfrWiring) signerExport(xz *xfr.Zone, z *zonedata.Zone, now time.Time) bool {
	xz.Fixed = true
	if !z.MultiSigner() {
		delete(w.signed, z.Origin)
		xz.Fallbacks = nil
		return true
	}
	prev := w.signed[z.Origin]
	start := time.Now()
	e, err := snapshot.BuildSignerExport(z, xz.Fallbacks, prev, now)
	if err != nil {
		w.log.Error("zone transfers: cannot build the multi-signer export; the secondaries keep what they have", "zone", z.Origin, "err", err)
		return false
	}
	if e != prev {
		w.log.Debug("zone transfers: multi-signer export built", "zone", z.Origin, "serial", z.Serial(), "records", len(e.RRs),
			"signatures_made", e.Made, "signatures_kept", e.Kept, "took", time.Since(start).Round(time.Microsecond))
		if exp := z.PresignedExpiry(); !e.Expires.IsZero() && exp != 0 && e.Expires.Unix() < int64(exp) {
			// Its fallbacks' signatures are renewed with the signer's
			// next serial only.
			w.log.Warn("zone transfers: steer's signatures of the exported steered names expire before the signer's own: unless the signer's serial moves before, the secondaries will serve them expired; give the zone's dnssec section a validity longer than the signer's",
				"zone", z.Origin, "serial", z.Serial(), "expires", e.Expires.UTC().Format(time.RFC3339),
				"signer_expires", time.Unix(int64(exp), 0).UTC().Format(time.RFC3339))
		}
		w.signed[z.Origin] = e
	}
	rrs := e.RRs
	xz.Version, xz.Fallbacks, xz.Each = e, nil, nil
	xz.NodeSigned = true
	xz.Records = func(dst []dns.RR) []dns.RR { return append(dst, rrs...) }
	return true
}

// exportSigPeriod is the period a signed export's earliest signature
// expiration is rounded down to in the digest the fleet agrees serials
// by (xfr.Zone.SigPeriod). A node moves its export to the next period
// when its signatures expiring in this one are renewed, which is by the
// period's end less the renewal margin (1 − refresh of the shortest
// span, validity less jitter plus backdate); a secondary's copy under
// the period holds signatures expiring no earlier than the period's
// start, and an SOA signature made with the serial, which may expire up
// to the jitter (a tenth of the validity) before a signature made with
// it. The period is half of what remains of the margin after the
// jitter (defaults: 0.88 days, a new serial about daily, 0.88 days
// before a copy's first signature expires), at least an eighth of the
// margin and a second.
func exportSigPeriod(o dnssec.Options) time.Duration {
	margin := (1 - o.Refresh) * (float64(o.Validity)*(1-o.Jitter) + float64(o.Backdate))
	p := max((margin-o.Jitter*float64(o.Validity))/2, margin/8)
	return max(time.Duration(p), time.Second)
}

// scheduleRenewal sets the timer that builds the signed exports again
// when the first signature one of them made is due for renewal (w.mu
// held): the export changes (and gets a new serial) before what the
// secondaries serve expires.
func (w *xfrWiring) scheduleRenewal(now time.Time) {
	var at time.Time
	for _, e := range w.signed {
		if !e.Refresh.IsZero() && (at.IsZero() || e.Refresh.Before(at)) {
			at = e.Refresh
		}
	}
	if w.closed || at.IsZero() || (w.renew != nil && at.Equal(w.renewAt)) {
		return
	}
	if w.renew != nil {
		w.renew.Stop()
	}
	w.renewAt = at
	w.renew = time.AfterFunc(max(at.Sub(now), time.Second), func() { w.Refresh() })
}

// xfrZones is what the service sees of snap: every zone served, and for
// those with secondaries what they export; signed, when set, makes the
// export of a signed zone its signed export (false: none to give).
func xfrZones(snap *snapshot.Snapshot, signed func(*xfr.Zone, *zonedata.Zone) bool) []xfr.Zone {
	if snap == nil {
		return nil
	}
	out := make([]xfr.Zone, 0, len(snap.Zones.Zones()))
	for _, z := range snap.Zones.Zones() {
		xz := xfr.Zone{Origin: z.Origin, Serial: z.Serial(), FileSerial: z.FileSerial(), In: snap.Secondaries[z.Origin]}
		if z.Failed == "" {
			xz.SOA = z.SOA
		}
		out = append(out, xz)
	}
	// The zones are in configuration order: a zone transferred out is
	// found in its place, and through an index only if it is not there
	// (built once, for the first such zone: most hosts have none).
	var at map[string]int
	for j, zc := range snap.Config.Zones {
		if len(zc.Secondaries) == 0 {
			continue
		}
		origin := dns.CanonicalName(zc.Origin)
		i, ok := j, j < len(out) && out[j].Origin == origin
		if !ok {
			if at == nil {
				at = make(map[string]int, len(out))
				for k := range out {
					at[out[k].Origin] = k
				}
			}
			i, ok = at[origin]
		}
		if !ok || out[i].SOA == nil {
			continue
		}
		z := snap.Zones.Zone(out[i].Origin)
		xz := &out[i]
		// Version is the zone's base: a zone given another serial to
		// export (WithSerial) holds the same records, whose digest and
		// delta are not taken again.
		xz.Journal, xz.Version, xz.Records, xz.Each = zc.Journal(), z.Base(), z.AppendRecords, z.EachRecord
		xz.Fallbacks = snap.Fallbacks(z)
		if signed != nil && z.Signed() {
			if !signed(xz, z) {
				xz.SOA = nil // nothing consistent to transfer: the secondaries keep their copy
			}
		}
		for _, s := range zc.Secondaries {
			xz.Secondaries = append(xz.Secondaries, xfr.Secondary{Prefix: s.Prefix(), Key: snap.TSIG[s.TSIG], Notify: s.NotifyAddr()})
		}
	}
	return out
}

// steeredIn lists the steered names snap puts in the zone origin, with
// the type a transferred copy must leave them (A for addresses, CNAME).
func steeredIn(snap *snapshot.Snapshot, origin string) map[string]uint16 {
	if snap.Policies == nil {
		return nil
	}
	out := map[string]uint16{}
	for _, r := range snap.Policies.Records {
		if z := snap.Zones.Find(r.Name); z == nil || z.Origin != origin {
			continue
		}
		out[r.Name] = dns.TypeA
		if r.Type == dns.TypeCNAME {
			out[r.Name] = dns.TypeCNAME
		}
	}
	return out
}

// status is a zone's transfer state for /v1/status (nil: none).
func (w *xfrWiring) status(snap *snapshot.Snapshot, z *zonedata.Zone) *api.ZoneTransfer {
	origin := z.Origin
	var zc *config.Zone
	for i := range snap.Config.Zones {
		if dns.CanonicalName(snap.Config.Zones[i].Origin) == origin {
			zc = &snap.Config.Zones[i]
		}
	}
	if zc == nil || (!zc.Secondary() && len(zc.Secondaries) == 0) {
		return nil
	}
	zt := &api.ZoneTransfer{Secondaries: len(zc.Secondaries)}
	st := w.Status(origin)
	if zc.Secondary() {
		zt.Primaries = append(zt.Primaries, zc.Primaries...)
		if s := st.In; s != nil {
			zt.Primary, zt.LastTransfer, zt.Refreshed, zt.NextRefresh = s.Primary, s.LastTransfer, s.Refreshed, s.NextRefresh
			zt.Expires, zt.Expired, zt.LastError = s.Expires, s.Expired, s.LastError
		}
	}
	if st.Exported {
		zt.ExportedSerial, zt.Journal = st.ExportedSerial, st.Journal
		if fs := z.FileSerial(); fs != z.Serial() {
			zt.FileSerial = fs
		}
	}
	return zt
}

// servedSnapshot returns the snapshot served now; nil before the server
// exists (during New). The transfer service calls it from its own
// goroutines (a secondary zone transferred while New still builds), so it
// reads the server New published (setServer), never n.srv.
func (n *Node) servedSnapshot() *snapshot.Snapshot {
	srv := n.serving.Load()
	if srv == nil {
		return nil
	}
	return srv.Handler().Snapshot()
}

// setServer installs the DNS server New made, publishing it to
// servedSnapshot.
func (n *Node) setServer(srv *dnsserver.Server) {
	n.srv = srv
	n.serving.Store(srv)
}

var _ dnsserver.Transfers = (*xfr.Service)(nil)
