package snapshot

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/zone"
)

// Options control how BuildWith treats a zone whose file fails to load.
type Options struct {
	// Previous is the snapshot served until now, on a reload: a zone that
	// fails keeps the copy it has there (same origin).
	Previous *Snapshot
	// CacheDir is where the last good copy of every zone is kept across
	// restarts, one file per origin (see CacheFile); "" keeps none. After
	// a successful build each zone loaded from its own file is written
	// there when it changed, and a zone that fails with no copy in
	// Previous is loaded from there.
	CacheDir string
	// DeferCopies leaves the writing of the last good copies to the
	// caller, once the snapshot is served (Snapshot.Copies, a node's
	// background writer): a start with 100,000 zones would otherwise
	// answer only after 100,000 files were written.
	DeferCopies bool
	// Secondary returns the copy to serve of a zone transferred in from
	// primaries (config Zone.Primaries). nil: every secondary zone is
	// answered SERVFAIL, as not transferred yet (steer check).
	Secondary func(origin string) Transferred
	// Serials are the serials zones are exported with, by origin, when
	// steer changed what a zone transfers without its file's serial
	// changing (a steered name's fallback). A serial not newer than the
	// file's (RFC 1982) is ignored: the file's wins.
	Serials map[string]uint32
	// KeepServed takes each zone Previous serves from its file as it is,
	// without reading the file again (a zone degraded there is read):
	// a rebuild for a secondary zone's new copy or a zone's new exported
	// serial, which costs what changed, not a read of every zone. A
	// pending edit of a zone file stays unserved until a reload.
	KeepServed bool
	// Reread, with KeepServed, names the zones (canonical origins) whose
	// files are looked at again as a reload does (stamped, and read and
	// parsed only when changed): a reload of named zones (Knot's
	// zone-reload), which touches those files only.
	Reread map[string]bool
	// Hooks are called for each steered answer (metrics); they are given
	// to the live state of a table built anew. A kept table keeps its
	// live state, hooks and all.
	Hooks policy.Hooks
	// Now is the time signed zones are signed at (zero: the current
	// time as each is signed). A zone kept from Previous has the signatures due by then
	// renewed (zone.Resigned).
	Now time.Time
	// ZoneKeys, when set, says which keys sign a signed zone at now and
	// which are only published in its DNSKEY RRset, given the keys its
	// dnssec section dc configures: the node's key plans (a ZSK rollover,
	// internal/keyroll). nil: the configured keys sign. An error is the
	// zone's dnssec section's, and rejects the build as a key that cannot
	// be read does: the zone is never served unsigned, nor signed with a
	// key it does not publish.
	ZoneKeys func(origin string, dc *dnssec.Config, configured []*dnssec.Key, now time.Time) (sign, publish []*dnssec.Key, err error)
}

// What a degraded zone is served from (ZoneProblem.Serving); a zone read
// from the cache says "last good copy (from cache <path>)".
const (
	ServingPrevious = "last good copy (from previous load)"
	ServingServfail = "SERVFAIL"
	// ServingUnsteered is a zone signed elsewhere whose steered answers
	// steer's ZSK cannot sign (zone.SignSteered): its data, signed by its
	// signer, with the steered names answered by the signer's records.
	ServingUnsteered = "the signer's data, steered names unsteered"
)

func servingCache(path string) string { return "last good copy (from cache " + path + ")" }

// ZoneProblem is a zone BuildWith could not load from its file as
// configured, and what is served for it instead.
type ZoneProblem struct {
	// Origin is the zone (canonical) and File its configured file.
	Origin, File string
	// Problem is the first problem, as file:line: message, with a count
	// of the others; Problems holds them all (they are among the build's
	// warnings too).
	Problem  string
	Problems diag.Problems
	// Serving is ServingPrevious, a cache copy or ServingServfail.
	Serving string
	// Skipped names the steered records inside the zone that cannot be
	// answered while it is SERVFAIL.
	Skipped []string
}

// Build loads every zone cfg names and assembles a Snapshot. Problems in any
// file are all reported (as diag.Problems); warnings never stop a load.
// Build is strict: a zone that fails to load rejects the whole
// configuration (steer check, tests). A node uses BuildWith.
func Build(cfg *config.Config) (snap *Snapshot, warns diag.Problems, err error) {
	return build(cfg, Options{}, true)
}

// BuildWith is Build for a serving node, which, like Knot and NSD, fails
// only the zone whose file fails to load rather than the whole
// configuration. Such a zone is served from, in order: its copy in
// opts.Previous, its copy in opts.CacheDir, or else as a failed zone that
// answers SERVFAIL for every name in it. Each one is listed in
// Snapshot.Degraded and its problems (file:line of the zone file) are
// among the warnings: the build still succeeds. A zone file that loads
// but conflicts with a steered record is treated the same way when a last
// good copy agrees with the records, and rejects the configuration
// otherwise. Anything wrong with the configuration itself (records, geo
// databases, health checks) is an error, as with Build.
func BuildWith(cfg *config.Config, opts Options) (snap *Snapshot, warns diag.Problems, err error) {
	return build(cfg, opts, false)
}

func build(cfg *config.Config, opts Options, strict bool) (*Snapshot, diag.Problems, error) {
	var errs, warns diag.Problems
	checks := healthChecks(cfg, &errs)
	keys := loadTSIG(cfg, &errs, &warns)
	zoneKeys := loadDNSSECKeys(cfg, &errs) // the keys of the zones signed
	// The time each zone is signed at: read when it is signed, not when
	// the build starts, so a build that compiles for long (seconds under
	// load) publishes signatures as young as its last step.
	now := func() time.Time {
		if !opts.Now.IsZero() {
			return opts.Now
		}
		return time.Now()
	}
	signWorkers := policy.Workers(opts.Previous != nil)
	sg := signingFor(cfg, opts.Previous) // the online signing state zones' signers share
	warnSources(cfg, &warns)
	var geoSet *geo.Set
	var geoFiles []string
	var table *policy.Table
	policiesKept := false
	if len(cfg.Records) > 0 && len(errs) == 0 {
		var prevGeo *geo.Set
		var prevTable *policy.Table
		if opts.Previous != nil {
			prevGeo, prevTable = opts.Previous.Geo, opts.Previous.Policies
		}
		geoSet, geoFiles = openGeo(cfg, &errs, prevGeo)
		if len(errs) == 0 {
			var pwarns diag.Problems
			var err error
			if prevTable != nil && opts.Previous.Config == cfg && geoSet == prevGeo {
				// The same parsed configuration (its file had the same
				// bytes) against the same databases: the served table is
				// the answer. Its warnings were given when it was built.
				table = prevTable
				policiesKept = true
			} else {
				table, pwarns, err = policy.BuildWith(cfg, geoSet, prevTable)
			}
			warns = append(warns, pwarns...)
			if err != nil {
				errs = append(errs, err.(diag.Problems)...)
			}
		}
	}

	// Each steered record belongs to the most specific configured zone
	// that contains it, whether that zone loads or not.
	origins := map[string]bool{}
	for _, zc := range cfg.Zones {
		origins[dns.CanonicalName(zc.Origin)] = true
	}
	steered := map[string][]*policy.Record{}
	if table != nil {
		enc := encloser{origins: origins}
		for _, r := range table.Records {
			o, ok := enc.find(r.Name)
			if !ok {
				errs.Add(cfg.File, r.Line, "record %s is in no served zone (a steered name needs a zone for its SOA and NS)", r.Name)
				continue
			}
			steered[o] = append(steered[o], r)
		}
	}

	var zones, fresh []*zone.Zone
	var degraded []ZoneProblem
	reused := 0
	prevSteered := steeredByZone(opts.Previous)
	prevDegraded := map[string]bool{}
	if opts.Previous != nil {
		for _, d := range opts.Previous.Degraded {
			prevDegraded[d.Origin] = true
		}
	}
	// marks holds the zones with steered records only: a host of
	// 100,000 zones and a few steered names pays for the few.
	marks := map[*zone.Zone][]*policy.Record{}
	setMarks := func(z *zone.Zone, recs []*policy.Record) {
		if len(recs) > 0 {
			marks[z] = recs
		}
	}
	secondaries := map[string]bool{}
	parseWorkers := policy.Workers(opts.Previous != nil)
	var pre []*preparsed
	if len(errs) == 0 { // a configuration rejected already loads no zone
		pre = preparse(cfg, opts.Previous, parseWorkers, now)
	}
	parsed, read := 0, 0
	prevZones := inPlace{prev: opts.Previous}
	for i, zc := range cfg.Zones {
		origin := dns.CanonicalName(zc.Origin)
		file := cfg.Resolve(zc.File)
		recs := steered[origin]
		pz := prevZones.at(i, origin)
		var signer *dnssec.Signer
		if signsZone(&zc) {
			keys := zoneKeys[origin]
			if len(keys) == 0 {
				continue // the keys' problems are among errs
			}
			var publish []*dnssec.Key
			if opts.ZoneKeys != nil {
				sign, pub, err := opts.ZoneKeys(origin, zc.DNSSEC, keys, now())
				if err != nil {
					errs.Add(cfg.File, zc.DNSSEC.Line, "zones: %s: dnssec: %v", origin, err)
					continue
				}
				keys, publish = sign, pub
			}
			var err error
			if signer, err = zoneSigner(origin, zc.DNSSEC, keys, publish, opts.Previous, sg); err != nil {
				errs.Add(cfg.File, zc.DNSSEC.Line, "zones: %s: dnssec: %v", origin, err)
				continue
			}
		}
		var data []byte
		var rerr error
		var keep *zone.Zone // Previous's, kept unread (KeepServed, or its file's stamp is the same)
		var st zone.FileStamp
		var stOK bool     // st is the file's stamp before data was read
		var pp *preparsed // the file read and parsed ahead (preparse)
		if pre != nil {
			pp = pre[i]
		}
		if zc.Secondary() {
			secondaries[origin] = true
			tr := Transferred{Unusable: "not transferred yet"}
			if opts.Secondary != nil {
				tr = opts.Secondary(origin)
			}
			if tr.Data == nil {
				zp := ZoneProblem{Origin: origin, File: tr.Name, Problem: tr.Unusable, Serving: ServingServfail}
				for _, r := range recs {
					zp.Skipped = append(zp.Skipped, r.Name)
				}
				if opts.Secondary != nil {
					warns.Add(cfg.File, zc.Line, "zone %s is a secondary with no copy to serve (%s): answering SERVFAIL until a primary transfers it", origin, tr.Unusable)
					degraded = append(degraded, zp)
				}
				zones = append(zones, zone.NewFailed(origin, "primaries", tr.Unusable))
				continue
			}
			file, data = tr.Name, tr.Data
		} else if pp != nil {
			// No previous copy: nothing to keep (preparse).
			st, stOK, data, rerr = pp.st, pp.stOK, pp.data, pp.rerr
			read++
		} else if opts.KeepServed && !opts.Reread[origin] && pz != nil && pz.Failed == "" && pz.File == file && !prevDegraded[origin] {
			keep = pz
		} else if st, stOK = zone.StampFile(cfg.FS, file, time.Now()); stOK && pz != nil && pz.Failed == "" && pz.File == file && sameStamp(pz, st) && !prevDegraded[origin] {
			// The file was not written since it was read for the zone
			// served: kept unread, as Knot and NSD keep a zone whose
			// file's mtime did not change (a reload with one zone of
			// 100,000 changed reads one file).
			keep = pz
		} else {
			data, rerr = zone.ReadFile(cfg.FS, file)
			read++
		}
		serial := opts.Serials[origin]
		unchanged := func(pz *zone.Zone) bool { return pz != nil && (pz == keep || rerr == nil && pz.Unchanged(file, data)) }
		if unchanged(pz) && sameSteered(prevSteered[pz], recs) && pz.SteeredSigner() == signer && !presignedExpired(pz, now()) &&
			(serial == 0 || serial == pz.Serial() || !newer(serial, pz.FileSerial())) {
			// The same bytes, the same steered names and the same keys:
			// the zone being served is kept as it is (marked, signed and
			// precompiled already), but for signatures due for renewal.
			kz, err := pz.Resigned(now(), signWorkers)
			if err != nil {
				warns.Add(cfg.File, zc.Line, "zone %s: renewing signatures: %v (the current ones are kept)", origin, err)
				kz = pz
			}
			zones = append(zones, kz)
			setMarks(kz, recs)
			reused++
			continue
		} else if unchanged(pz) && sameSteered(prevSteered[pz], recs) && pz.SteeredSigner() == signer && !pz.Presigned() {
			// Only the serial to export moved (a steered name's
			// fallback): the served zone with a new apex, not a parse.
			nz, zerrs := pz.WithSerial(serial)
			if len(zerrs) == 0 {
				zones = append(zones, nz)
				setMarks(nz, recs)
				reused++
				continue
			}
		}
		if keep != nil {
			data, rerr = zone.ReadFile(cfg.FS, file) // its steered names changed: parse it after all
			read++
		}
		var z *zone.Zone
		var zerrs, zwarns diag.Problems
		if rerr != nil {
			zerrs.Add(file, 0, "%v", rerr)
		} else {
			// A reload parses on the cores answering leaves free
			// (policy.Workers) and shares what did not change with the
			// zone being served.
			if pp != nil && pp.parsed {
				z, zerrs, zwarns = pp.z, pp.zerrs, pp.zwarns
			} else {
				po := zone.ParseOptions{Workers: parseWorkers, Now: now()}
				if opts.Previous != nil {
					po.Previous = pz
				}
				z, zerrs, zwarns = zone.ParseWith(cfg.FS, zc.Origin, file, data, po)
			}
			parsed++
			if len(zerrs) == 0 {
				var err error
				if z, err = applySerial(z, serial); err != nil {
					zerrs.Add(file, 0, "%v", err)
				}
			}
		}
		warns = append(warns, zwarns...)
		for i, p := range zerrs {
			// A zone-wide problem (unreadable file, no SOA) is pointed at
			// the configuration entry that names the zone.
			if p.File == file && p.Line == 0 {
				zerrs[i] = diag.Problem{File: cfg.File, Line: zc.Line, Msg: fmt.Sprintf("zone %s (%s): %s", zc.Origin, file, p.Msg)}
			}
		}
		var merrs diag.Problems
		if z != nil {
			zerrs = append(zerrs, presignedChecks(cfg, &zc, z, file)...)
			merrs = mark(cfg, z, recs)
		}
		if z != nil && len(merrs) == 0 && signer == nil && len(recs) > 0 && z.SignedElsewhere() {
			merrs = signedElsewhere(cfg, z, recs)
		}
		if z != nil && len(zerrs) == 0 && len(merrs) == 0 {
			// Signed before it is precompiled; a zone that cannot be
			// signed is not served unsigned: it fails, alone.
			if err := signZone(z, signer, now(), signWorkers); err != nil {
				if !strict && signer.ZSKOnly() && z.Presigned() {
					// A zone signed elsewhere whose steered answers
					// steer's ZSK cannot sign so that they validate: its
					// signer's data validates, so it is served (a copy
					// that is not signed fails as any zone that cannot
					// be signed: never served unsigned), the
					// steered names answering with the signer's
					// stand-ins (zone.Unsteer), never with signatures
					// by a key validators cannot find.
					z.Unsteer()
					p := diag.Problem{File: cfg.File, Line: zc.DNSSEC.Line, Msg: err.Error()}
					zp := ZoneProblem{Origin: origin, File: file, Problems: diag.Problems{p}, Problem: p.String(), Serving: ServingUnsteered}
					for _, r := range recs {
						zp.Skipped = append(zp.Skipped, r.Name)
						warns.Add(cfg.File, r.Line, "record %s is not steered: zone %s answers it with the signer's records until steer's ZSK can sign it", r.Name, origin)
					}
					warns = append(warns, p)
					warns.Add(cfg.File, zc.Line, "zone %s (%s): serving %s", origin, file, ServingUnsteered)
					degraded = append(degraded, zp)
					zones = append(zones, z)
					if !zc.Secondary() {
						fresh = append(fresh, z)
					}
					setMarks(z, recs)
					continue
				}
				ln := zc.Line
				if signer.ZSKOnly() {
					ln = zc.DNSSEC.Line // the keys, and what the signer must publish
				}
				zerrs.Add(cfg.File, ln, "%v", err)
			}
		}
		if len(zerrs) == 0 && len(merrs) == 0 {
			if stOK && !zc.Secondary() {
				z.SetStamp(st)
			}
			zones = append(zones, z)
			if !zc.Secondary() { // a secondary's copy is kept by its transfers
				fresh = append(fresh, z)
			}
			setMarks(z, recs)
			continue
		}
		if strict {
			errs = append(errs, zerrs...)
			errs = append(errs, merrs...)
			continue
		}
		fz, serving, notes := fallback(cfg, origin, recs, opts, signer, now())
		if fz == nil && len(zerrs) == 0 {
			// The file loads but conflicts with the steered records, and
			// no last good copy agrees with them: the configuration is at
			// fault as much as the zone, so it is rejected, as by Build.
			errs = append(errs, merrs...)
			continue
		}
		probs := append(append(diag.Problems{}, zerrs...), merrs...)
		_ = probs.Err() // sorts by file and line
		zp := ZoneProblem{Origin: origin, File: file, Problems: probs, Problem: probs[0].String()}
		if len(probs) > 1 {
			zp.Problem += fmt.Sprintf(" (and %d more)", len(probs)-1)
		}
		warns = append(warns, probs...)
		for _, n := range notes {
			warns.Add(cfg.File, zc.Line, "zone %s: %s", origin, n)
		}
		if fz != nil {
			zp.Serving = serving
			zones = append(zones, fz)
			setMarks(fz, recs)
		} else {
			zp.Serving = ServingServfail
			zones = append(zones, zone.NewFailed(origin, file, zp.Problem))
			for _, r := range recs {
				zp.Skipped = append(zp.Skipped, r.Name)
				warns.Add(cfg.File, r.Line, "record %s is in zone %s, which failed to load: it is answered SERVFAIL", r.Name, origin)
			}
		}
		warns.Add(cfg.File, zc.Line, "zone %s (%s) failed to load; serving %s", origin, file, zp.Serving)
		degraded = append(degraded, zp)
	}
	if err := errs.Err(); err != nil {
		return nil, warns, err
	}
	var live *policy.Live
	switch {
	case policiesKept && opts.Previous.Live != nil:
		live = opts.Previous.Live
	case table != nil:
		var prevLive *policy.Live
		if opts.Previous != nil {
			prevLive = opts.Previous.Live
		}
		live = policy.NewLive(table, policy.LiveOptions{Hooks: opts.Hooks, Previous: prevLive})
	}
	transferWarnings(cfg, marks, zones, &warns)
	set := zone.NewSet(zones)
	// The text of each zone read now, taken before Precompile lets a
	// large zone's go (writing its records out again would cost more
	// than the parse that only read the chunks that changed).
	var sources []zoneCopy
	if opts.CacheDir != "" {
		sources = make([]zoneCopy, 0, len(fresh))
		for _, z := range fresh {
			if src := z.Source(); src != nil {
				sources = append(sources, zoneCopy{z.Origin, src})
			}
		}
	}
	set.PrecompileOn(parseWorkers) // many small zones on every core at start
	presigned, err := presignSteered(sg, set, table, live, opts.Previous, now())
	if err != nil {
		errs.Add(cfg.File, 0, "signing the steered answers: %v", err)
		return nil, warns, errs.Err()
	}
	var copies *Copies
	if len(sources) > 0 {
		// Only now: a zone is kept as a last good copy once the whole
		// configuration it belongs to has been accepted.
		copies = &Copies{dir: opts.CacheDir, items: sources}
		if !opts.DeferCopies {
			warns = append(warns, copies.Keep()...)
			copies = nil
		}
	}
	s := &Snapshot{
		Geo:               geoSet,
		GeoFiles:          geoFiles,
		HealthChecks:      checks,
		Policies:          table,
		Live:              live,
		ECS:               *cfg.ECS.Enabled,
		MaxSourceV4:       cfg.ECS.MaxSourceV4,
		MaxSourceV6:       cfg.ECS.MaxSourceV6,
		Config:            cfg,
		Zones:             set,
		Identity:          cfg.ServerIdentity(),
		Listen:            cfg.Listen,
		TCPMaxConnections: cfg.TCP.MaxConns,
		TCPIdleTimeout:    time.Duration(cfg.TCP.IdleTimeout),
		Loaded:            time.Now(),
		Degraded:          degraded,
		ZonesReused:       reused,
		ZonesParsed:       parsed,
		ZoneFilesRead:     read,
		PoliciesKept:      policiesKept,
		marks:             marks,
		Secondaries:       secondaries,
		Signing:           sg,
		Presigned:         presigned,
		Copies:            copies,
	}
	s.SetTSIG(keys)
	if cfg.VersionBind != config.VersionHidden {
		s.Version = cfg.VersionBind
	}
	return s, warns, nil
}

// previousZone is prev's zone for origin, if it loaded (nil otherwise).
func previousZone(prev *Snapshot, origin string) *zone.Zone {
	if prev == nil {
		return nil
	}
	return prev.Zones.Zone(origin)
}

// inPlace finds a zone of prev by the index of its configuration entry:
// prev's zones are in configuration order, which a reload mostly keeps,
// so the zone at the same index is the one, found with no hashing (a
// reload of 100,000 zones looks each up); others by origin.
type inPlace struct{ prev *Snapshot }

func (p inPlace) at(i int, origin string) *zone.Zone {
	if p.prev == nil {
		return nil
	}
	if l := p.prev.Zones.Zones(); i < len(l) && l[i].Origin == origin {
		return l[i]
	}
	return p.prev.Zones.Zone(origin)
}

// steeredByZone returns, for each zone of prev, the steered records it
// was marked with, so a zone kept as it is must steer exactly the names
// recs do. A snapshot not made by build (no marks kept) has its records
// grouped by the zone that serves them.
func steeredByZone(prev *Snapshot) map[*zone.Zone][]*policy.Record {
	if prev != nil && prev.marks != nil {
		return prev.marks
	}
	out := map[*zone.Zone][]*policy.Record{}
	if prev != nil && prev.Policies != nil {
		for _, r := range prev.Policies.Records {
			if z := prev.Zones.Find(r.Name); z != nil {
				out[z] = append(out[z], r)
			}
		}
	}
	return out
}

// sameSteered reports whether a and b steer the same names with the same
// kind of record (CNAME, or A and AAAA), in any order. A reload usually
// lists them in the same order: that is compared first, without
// allocating.
func sameSteered(a, b []*policy.Record) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i].Name == b[i].Name && steeredKind(a[i]) == steeredKind(b[i]) {
		i++
	}
	if i == len(a) {
		return true
	}
	rest := make(map[string]uint32, len(a)-i)
	for _, r := range a[i:] {
		rest[r.Name] = steeredKind(r)
	}
	for _, r := range b[i:] {
		if t, ok := rest[r.Name]; !ok || t != steeredKind(r) {
			return false
		}
		delete(rest, r.Name) // a name twice in b is not in a twice
	}
	return len(rest) == 0
}

// steeredType is the type a record is marked with in its zone.
func steeredType(r *policy.Record) uint16 {
	if r.Type == dns.TypeCNAME {
		return dns.TypeCNAME
	}
	return dns.TypeA
}

// steeredKind is what a zone's marks of a record depend on: its type and
// the address families its pools have (the NSECs of signed denials list
// them), so a zone is kept across a reload only when they are the same.
func steeredKind(r *policy.Record) uint32 {
	v4, v6 := r.Families()
	k := uint32(steeredType(r))
	if v4 {
		k |= 1 << 16
	}
	if v6 {
		k |= 1 << 17
	}
	return k
}

// mark makes the records' names steered in z, which is not published yet.
func mark(cfg *config.Config, z *zone.Zone, recs []*policy.Record) diag.Problems {
	var errs diag.Problems
	for _, r := range recs {
		if err := z.MarkSteered(r.Name, steeredType(r)); err != nil {
			errs.Add(cfg.File, r.Line, "record %s: %v", r.Name, err)
			continue
		}
		v4, v6 := r.Families()
		z.SteeredFamilies(r.Name, v4, v6)
	}
	return errs
}

// signedElsewhere refuses the steered records recs of z, a zone whose
// data carries a signer's DNSKEY RRset and signatures, when steer has
// no ZSK of it: their answers would go out unsigned or with the
// signer's signatures over other records, and fail validation.
func signedElsewhere(cfg *config.Config, z *zone.Zone, recs []*policy.Record) diag.Problems {
	var errs diag.Problems
	for _, r := range recs {
		errs.Add(cfg.File, r.Line, "record %s is in zone %s, which is signed elsewhere (it carries its signer's DNSKEY RRset and signatures): steer cannot sign its steered answers without a ZSK of the zone; make one (steer dnssec keygen %s --role zsk), have the signer publish its DNSKEY, and give it to the zone (dnssec: { keys: [...] }, multi-signer: see the README), or steer the name in a zone steer signs or leaves unsigned",
			r.Name, z.Origin, z.Origin)
	}
	return errs
}

// fallback finds a last good copy of the zone origin that takes the
// steered records recs: the one in opts.Previous, else the one in
// opts.CacheDir. notes says why a copy that exists was not usable.
//
// The copy is always parsed again from its text (zone.Source), never
// reused as the *zone.Zone object: that object is published, read by
// queries in flight without locks, and MarkSteered and Precompile write
// to it. Even when the steered names would be the same, a fresh parse is
// the simple way to be sure nothing published is ever written.
func fallback(cfg *config.Config, origin string, recs []*policy.Record, opts Options, signer *dnssec.Signer, now time.Time) (*zone.Zone, string, []string) {
	var notes []string
	try := func(file string, src []byte, what string) *zone.Zone {
		// At now: a pre-signed copy whose signatures have expired since
		// is no good copy.
		z, errs, _ := zone.ParseWith(nil, origin, file, src, zone.ParseOptions{Now: now})
		if len(errs) > 0 {
			notes = append(notes, fmt.Sprintf("the %s does not load either: %v", what, errs[0]))
			return nil
		}
		if perrs := presignedChecks(cfg, zoneConfig(cfg, origin), z, file); len(perrs) > 0 {
			notes = append(notes, fmt.Sprintf("the %s does not load either: %v", what, perrs[0]))
			return nil
		}
		if merrs := mark(cfg, z, recs); len(merrs) > 0 {
			notes = append(notes, fmt.Sprintf("the %s conflicts with the steered records: %s", what, merrs[0].Msg))
			return nil
		}
		if err := signZone(z, signer, now, policy.Workers(true)); err != nil {
			notes = append(notes, fmt.Sprintf("the %s cannot be signed either: %v", what, err))
			return nil
		}
		return z
	}
	if opts.Previous != nil {
		if pz := opts.Previous.Zones.Zone(origin); pz != nil && pz.Source() != nil {
			if z := try(pz.File, pz.Source(), "copy from the previous load"); z != nil {
				return z, ServingPrevious, nil
			}
		}
	}
	if opts.CacheDir != "" {
		path, src, err := loadCopy(opts.CacheDir, origin)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("cannot read the cached copy: %v", err))
		case src != nil:
			if z := try(path, src, "cached copy "+path); z != nil {
				return z, servingCache(path), notes
			}
		}
	}
	return nil, "", notes
}

// enclosing returns the most specific of origins that contains name.
func enclosing(origins map[string]bool, name string) (string, bool) {
	for off, end := 0, false; !end; off, end = dns.NextLabel(name, off) {
		if origins[name[off:]] {
			return name[off:], true
		}
	}
	if origins["."] {
		return ".", true
	}
	return "", false
}

// encloser is enclosing for many names, remembering the answer for the
// last parent name: steered records are mostly siblings.
type encloser struct {
	origins map[string]bool
	parent  string // of the last name looked up
	origin  string
	ok      bool
}

func (e *encloser) find(name string) (string, bool) {
	if e.origins[name] {
		return name, true
	}
	off, end := dns.NextLabel(name, 0)
	if end {
		return enclosing(e.origins, name)
	}
	if p := name[off:]; p != e.parent {
		e.parent = p
		e.origin, e.ok = enclosing(e.origins, p)
	}
	return e.origin, e.ok
}

// openGeo opens the geo databases cfg names. A database of prev whose
// file reads back the same bytes (SHA-256) is taken instead of the new
// copy; when every database is prev's, in prev's order, prev itself is
// returned, so the policies compiled against it can be reused. The files
// are always read: a size and modification time can stay the same across
// a rewrite within one clock tick, their bytes cannot.
// OpenGeo opens the configuration's geo databases, as a build does, for
// a caller that compiles policies without building a snapshot (steer
// simulate); problems are at the databases' lines.
func OpenGeo(cfg *config.Config) (*geo.Set, error) {
	var errs diag.Problems
	set, _ := openGeo(cfg, &errs, nil)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return set, nil
}

func openGeo(cfg *config.Config, errs *diag.Problems, prev *geo.Set) (*geo.Set, []string) {
	geoSet := &geo.Set{}
	var files []string
	same := prev != nil && len(prev.DBs) == len(cfg.Geo.Databases)
	for i, name := range cfg.Geo.Databases {
		path := name
		if name != geo.EmbeddedName {
			path = cfg.LocalPath(name) // on the node's disk, also in a fleet
		}
		d, err := geo.Open(path)
		if err != nil {
			errs.Add(cfg.File, cfg.Line(fmt.Sprintf("geo.databases[%d]", i)), "geo database %s: %v", name, err)
			continue
		}
		if prev != nil {
			for _, old := range prev.DBs {
				if old.Name == path && old.Sum == d.Sum {
					d = old
				}
			}
		}
		same = same && i < len(prev.DBs) && prev.DBs[i] == d
		geoSet.DBs = append(geoSet.DBs, d)
		if name != geo.EmbeddedName {
			files = append(files, path)
		}
	}
	if same && len(geoSet.DBs) == len(prev.DBs) {
		return prev, files
	}
	return geoSet, files
}

// WithGeo rebuilds s against its geo databases as they are on disk now:
// it re-opens them and recompiles the steered records, and returns a new
// snapshot that shares everything else with s (configuration, zones,
// degraded zones). It reads neither the configuration nor any zone file,
// so an edit waiting there stays unserved until an explicit reload. When
// a database does not open or a record no longer compiles against it, it
// returns the error and s serves on. The new Policies get a new Live with
// s's hooks; the caller must set its health and latency as after a reload.
//
// The shared zones need no new MarkSteered: the configuration is the
// same, so the steered names and types are too, and the marks are in the
// zones already; the zones are not written to. Nor does the policy table
// point into the zones, or they into it: the zones only flag steered
// names, and queries look the record up by name in the snapshot's table.
func (s *Snapshot) WithGeo() (*Snapshot, diag.Problems, error) {
	n := *s
	n.Loaded = time.Now()
	if len(s.Config.Records) == 0 {
		return &n, nil, nil // no steered record: no database is opened
	}
	var errs diag.Problems
	geoSet, files := openGeo(s.Config, &errs, s.Geo)
	if err := errs.Err(); err != nil {
		return nil, nil, err
	}
	table, warns, err := policy.BuildWith(s.Config, geoSet, s.Policies)
	if err != nil {
		return nil, warns, err
	}
	n.Geo, n.GeoFiles, n.Policies = geoSet, files, table
	var hooks policy.Hooks
	if s.Live != nil {
		hooks = s.Live.Hooks()
	}
	n.Live = policy.NewLive(table, policy.LiveOptions{Hooks: hooks, Previous: s.Live})
	if s.Signing != nil {
		if n.Presigned, err = presignSteered(s.Signing, s.Zones, table, n.Live, s, time.Now()); err != nil {
			return nil, warns, err
		}
	}
	return &n, warns, nil
}

// sameStamp reports whether z was read from a file whose stamp was st.
func sameStamp(z *zone.Zone, st zone.FileStamp) bool {
	zs, ok := z.Stamp()
	return ok && zs == st
}
