package snapshot

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/tsig"
	"github.com/steer-dns/steer/internal/zone"
)

// Transferred is what a node holds of a secondary zone (Options.Secondary).
type Transferred struct {
	// Name names the copy in messages (its file on disk, or the primary).
	Name string
	// Data is the zone as master-file text; nil when there is no copy to
	// serve.
	Data []byte
	// Unusable says why there is no copy to serve ("not transferred yet",
	// "expired: ..."); the zone is then answered SERVFAIL.
	Unusable string
}

// LoadKeys reads the keys of cfg's tsig section (as a build does), by
// the name the section gives them.
func LoadKeys(cfg *config.Config) (map[string]tsig.Key, diag.Problems) {
	var errs, warns diag.Problems
	keys := loadTSIG(cfg, &errs, &warns)
	return keys, errs
}

// loadTSIG reads the keys of the tsig section from their files. Each
// problem is reported at the key's line of the configuration.
func loadTSIG(cfg *config.Config, errs, warns *diag.Problems) map[string]tsig.Key {
	if len(cfg.TSIG) == 0 {
		return nil
	}
	keys := make(map[string]tsig.Key, len(cfg.TSIG))
	names := make([]string, 0, len(cfg.TSIG))
	for n := range cfg.TSIG {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		kc := cfg.TSIG[name]
		line := cfg.Line("tsig." + name)
		if kc.SecretFile == "" {
			continue // config check reported it
		}
		// Key files travel with the configuration (a fleet bundle carries
		// them), as zone files do.
		file := cfg.Resolve(kc.SecretFile)
		data, err := config.ReadFile(cfg.FS, file)
		if err != nil {
			errs.Add(cfg.File, line, "tsig: %s: %v", name, err)
			continue
		}
		fkeys, err := tsig.ParseFile(data, file)
		if err != nil {
			errs.Add(cfg.File, line, "tsig: %s: %v", name, err)
			continue
		}
		alg, err := tsig.Algorithm(kc.Algorithm)
		if err != nil {
			errs.Add(cfg.File, line, "tsig: %s: %v", name, err)
			continue
		}
		var found *tsig.Key
		for i := range fkeys {
			if fkeys[i].Name == dns.CanonicalName(name) {
				found = &fkeys[i]
			}
		}
		switch {
		case found == nil:
			errs.Add(cfg.File, line, "tsig: %s: %s holds no key named %q (it has %s)", name, file, name, keyList(fkeys))
			continue
		case found.Algorithm != alg:
			errs.Add(cfg.File, line, "tsig: %s: algorithm %s here but %s in %s", name, kc.Algorithm, trimDot(found.Algorithm), file)
			continue
		}
		if found.Weak() {
			warns.Add(cfg.File, line, "tsig: %s uses hmac-sha1, which RFC 8945 §6 no longer recommends; prefer hmac-sha256", name)
		}
		keys[name] = *found
	}
	return keys
}

// warnSources warns about a transfer_source or notify_source that is not
// an address of this host: sending from it then fails (the kernel refuses
// to bind it) unless the address is added later.
func warnSources(cfg *config.Config, warns *diag.Problems) {
	t := &cfg.Transfers
	if t.TransferSource == "" && t.NotifySource == "" {
		return
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return
	}
	have := map[netip.Addr]bool{}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			have[p.Addr().Unmap()] = true
		}
	}
	ts, ns := t.SourceAddrs()
	for _, s := range []struct {
		key string
		a   netip.Addr
	}{{"transfer_source", ts}, {"notify_source", ns}} {
		// 127/8 is the loopback interface's whole, though only 127.0.0.1 is listed.
		if !s.a.IsValid() || have[s.a] || (s.a.Is4() && s.a.IsLoopback()) {
			continue
		}
		line := cfg.Line("transfers." + s.key)
		warns.Add(cfg.File, line, "transfers.%s: %s is not an address of this host: sending from it will fail until it is", s.key, s.a)
	}
}

func keyList(keys []tsig.Key) string {
	if len(keys) == 0 {
		return "none"
	}
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += trimDot(k.Name)
	}
	return s
}

func trimDot(s string) string {
	if len(s) > 1 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

// Key returns the TSIG key the configuration calls name.
func (s *Snapshot) Key(name string) (tsig.Key, bool) {
	k, ok := s.TSIG[name]
	return k, ok
}

// Steered returns the steered records of the zone z of s.
func (s *Snapshot) Steered(z *zone.Zone) []*policy.Record { return s.marks[z] }

// Export returns what a transfer of the zone origin sends: the zone's
// SOA, its records, each steered name's fallback answer, and the SOA
// again; nil when origin is not served or failed. A secondary cannot
// steer, so a steered name is exported as the answer steer gives a client
// it cannot place (the rules' default, with the health of now): never
// left out, which would make the secondary answer NXDOMAIN for it.
func (s *Snapshot) Export(origin string) []dns.RR {
	z := s.Zones.Zone(origin)
	if z == nil || z.Failed != "" || z.SOA == nil {
		return nil
	}
	rrs := z.AppendRecords(make([]dns.RR, 0, z.Records+2*len(s.marks[z])+1))
	for _, r := range s.marks[z] {
		rrs = append(rrs, s.Fallback(r)...)
	}
	return append(rrs, z.SOA)
}

// Fallback returns the records a steered record is exported with: for an
// address record its A and AAAA answers, for a CNAME record its CNAME, as
// answered to a client no rule places (0.0.0.0 or ::, which no database
// locates), with the record's TTL. It is decided stably (policy.Query's
// Stable, AppendStable): a non-sticky split exports its heaviest usable
// pool and a multivalue limit the first addresses in the record's order,
// the same every time for the same health, so that a reload changing
// nothing never moves the exported serial. When every pool is down and the
// record's when_all_down gives nothing, every pool's addresses are
// exported: a secondary serving a dead address is better than one saying
// the name does not exist.
func (s *Snapshot) Fallback(r *policy.Record) []dns.RR {
	if s.Policies == nil {
		return nil
	}
	types := []uint16{dns.TypeA, dns.TypeAAAA}
	if r.Type == dns.TypeCNAME {
		types = []uint16{dns.TypeCNAME}
	}
	var out []dns.RR
	answer := func(qtype uint16, up uint64) []dns.RR {
		q := policy.Query{Qtype: qtype, Up: up, Client: netip.IPv4Unspecified(), ClientBits: 32, Stable: true}
		if qtype == dns.TypeAAAA {
			q.Client, q.ClientBits = netip.IPv6Unspecified(), 128
		}
		if r.HasLatency() {
			q.Latency = s.Live.Latency()
		}
		d := r.Decide(&q)
		if d.ServFail || d.NoData {
			return nil
		}
		return r.AppendStable(nil, &d, qtype, s.Live.AddrMasks(r, &d))
	}
	for _, t := range types {
		out = append(out, answer(t, s.Live.Up(r, t))...)
	}
	if len(out) == 0 {
		for _, t := range types {
			out = append(out, answer(t, r.Enabled|^uint64(0))...)
		}
	}
	ttl := s.Live.TTL(r)
	for i, rr := range out {
		rr = dns.Copy(rr)
		rr.Header().Ttl = ttl
		rr.Header().Name = r.Name
		out[i] = rr
	}
	return out
}

// transferWarnings warns about zones that have steered names and are
// transferred out: their secondaries answer every client with the
// fallback.
func transferWarnings(cfg *config.Config, marks map[*zone.Zone][]*policy.Record, zones []*zone.Zone, warns *diag.Problems) {
	var by map[string]*zone.Zone // built for the first zone transferred out: most hosts have none
	for _, zc := range cfg.Zones {
		if len(zc.Secondaries) == 0 {
			continue
		}
		if by == nil {
			by = make(map[string]*zone.Zone, len(zones))
			for _, z := range zones {
				by[z.Origin] = z
			}
		}
		z := by[dns.CanonicalName(zc.Origin)]
		if n := len(marks[z]); z != nil && n > 0 {
			signed := ""
			switch {
			case z.MultiSigner():
				signed = " (signed elsewhere: a secondary serves the fallback signed with steer's ZSK in place of the signer's stand-in, beside the signer's data and chain as they came; as the SOA is the signer's, a fallback that moves reaches the secondaries with the signer's next serial)"
			case z.Presigned():
				signed = " (signed elsewhere, its steered names unsteered: a secondary serves the signer's stand-ins)"
			case zc.Signed():
				signed = " (signed, with steer's keys: a secondary serves the fallback and its signatures as any other RRset)"
			}
			warns.Add(cfg.File, zc.Line, "zone %s has %d steered name(s) and is transferred out to %d secondaries: they cannot steer and answer every client with the fallback answer (%s)%s, and a resolver caches their answers (no ECS option: RFC 7871 scope 0) for every client, so one such server flattens the steering of all; Google Public DNS's ECS guidelines require every authoritative server of an ECS-enabled zone to enable ECS (see README, Zone transfers)",
				z.Origin, n, len(zc.Secondaries), marks[z][0].Name, signed)
			if z.MultiSigner() && zc.DNSSEC != nil {
				// The export keeps steer's signatures over the fallbacks
				// for the signer's serial: they must outlast it.
				validity := z.SteeredSigner().Options().Validity
				if exp := time.Unix(int64(z.PresignedExpiry()), 0); time.Now().Add(validity).Before(exp) {
					warns.Add(cfg.File, zc.DNSSEC.Line, "zone %s: steer's signatures of the steered names last %s, but the signer's run until %s: the transfers out keep steer's for the signer's serial, so unless the signer's serial moves within %s its secondaries will serve them expired; give the zone a validity longer than the signer's",
						z.Origin, validity, exp.UTC().Format(time.RFC3339), validity)
				}
			}
		}
	}
}

// applySerial gives z the serial to export when it is newer than the
// file's (see Options.Serials).
func applySerial(z *zone.Zone, serial uint32) (*zone.Zone, error) {
	if z == nil || z.Failed != "" || serial == 0 || serial == z.Serial() || !newer(serial, z.FileSerial()) || z.Presigned() {
		// A pre-signed zone's SOA is its signer's, signed: its serial
		// is exported as it is.
		return z, nil
	}
	nz, errs := z.WithSerial(serial)
	if len(errs) > 0 {
		return z, fmt.Errorf("cannot set serial %d: %v", serial, errs[0])
	}
	return nz, nil
}

// newer reports whether serial a is after b (RFC 1982).
func newer(a, b uint32) bool { return a != b && (a-b) < 1<<31 }
