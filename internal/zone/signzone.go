package zone

import (
	"fmt"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// This file signs a zone's static data off the query path (RFC 4035 §2):
// the apex gets the DNSKEY, CDS and CDNSKEY RRsets of the zone's keys,
// and every RRset the zone is authoritative for gets its RRSIGs, kept
// beside it in the node (nodeSigs), so that a lookup with DO adds them
// without signing anything. Glue, occluded data and the NS RRset of a
// delegation are not signed (§2.2); a DS at a delegation is. A reload
// keeps the signatures of every RRset it shares with the served zone
// while they are fresh, and Resigned renews only those due.

// nodeSigs are a signed zone's signatures at one node.
type nodeSigs struct {
	// sets holds the RRSIGs of the node's rrsets[i] (nil for an RRset
	// that is not signed: glue, a delegation's NS).
	sets [][]dns.RR
	// templates are the DO variants of the node's precompiled answers,
	// each RRset followed by its RRSIGs (see TemplateDO).
	templates []template
}

// signerApex reports whether the signer makes the apex RRset of type t.
func signerApex(t uint16) bool {
	return t == dns.TypeDNSKEY || t == dns.TypeCDS || t == dns.TypeCDNSKEY
}

// sigsOf returns the RRSIGs of n's RRset of type t, or nil.
func (n *node) sigsOf(t uint16) []dns.RR {
	if n.sig == nil {
		return nil
	}
	for i := range n.rrsets {
		if n.rrsets[i].rtype == t {
			if i < len(n.sig.sets) {
				return n.sig.sets[i]
			}
			return nil
		}
	}
	return nil
}

// TemplateDO is Template for a query with the DO bit, for a signed zone:
// the RRset followed by its RRSIGs (and the additional section's with
// theirs). It is nil when there is none.
func (n *node) TemplateDO(qtype uint16) []byte {
	if n.sig == nil {
		return nil
	}
	for i := range n.sig.templates {
		if n.sig.templates[i].qtype == qtype {
			return n.sig.templates[i].bytes()
		}
	}
	return nil
}

// signs reports whether the RRset of type t at n is signed: authoritative
// data (RFC 4035 §2.2), which leaves out glue and occluded names, the NS
// RRset of a delegation (a DS there is the parent's and is signed), and
// RRSIGs, which are never signed.
func (n *node) signs(t uint16) bool {
	switch {
	case n.occluded, t == dns.TypeRRSIG:
		return false
	case n.cut:
		return t == dns.TypeDS
	}
	return true
}

// Sign makes z a signed zone: it sets the apex's DNSKEY, CDS and CDNSKEY
// RRsets (TTL the SOA's, or the signer's KeyTTL) from the signer's keys, in place of any the file
// has, and signs every RRset z is authoritative for, at now, on workers
// goroutines. An RRset shared with the zone served until now (see
// ParseOptions.Previous) keeps its signatures while they are fresh
// (Signer.Fresh): a reload re-signs what changed. Sign must run after
// MarkSteered and before Precompile; a nil signer leaves z unsigned. On
// an error z must not be served.
func (z *Zone) Sign(s *dnssec.Signer, now time.Time, workers int) error {
	if z.Failed != "" || s == nil {
		return nil
	}
	if z.precompiled {
		return fmt.Errorf("zone %s is published already", z.Origin)
	}
	if s.Zone != z.Origin {
		return fmt.Errorf("signer for %s, not for zone %s", s.Zone, z.Origin)
	}
	if z.pre != nil {
		return z.refuseSigner()
	}
	z.signer = s
	z.setApexKeys()
	var jobs []*node
	for name, n := range z.nodes.all {
		var pn *node
		if z.prev != nil {
			pn = z.prev.nodes.get(name)
		}
		if n.sig != nil && pn == n && z.prev.signer != nil && z.freshNode(n, now) {
			continue // the served zone's node, signed alike and fresh
		}
		if z.borrowed(n) {
			n = z.own(n)
		}
		jobs = append(jobs, n)
	}
	err := z.signNodes(jobs, now, workers, dnssec.ReasonLoad)
	z.negSigs = negSOASigs(z)
	return err
}

// setApexKeys puts the signer's DNSKEY, CDS and CDNSKEY RRsets at the
// apex, keeping the served zone's very RRsets when they are the same
// (so that their signatures and templates are kept too).
func (z *Zone) setApexKeys() {
	if z.borrowed(z.apex) {
		z.apex = z.own(z.apex)
	}
	apex := z.apex
	ttl := z.SOA.Hdr.Ttl
	dnskey, cds, cdnskey := z.signer.Apex(ttl)
	var pa *node
	if z.prev != nil {
		pa = z.prev.apex
	}
	sets := make([]rrset, 0, len(apex.rrsets)+3)
	for _, s := range apex.rrsets {
		if !signerApex(s.rtype) {
			sets = append(sets, s)
		}
	}
	for _, rrs := range [][]dns.RR{dnskey, cds, cdnskey} {
		if len(rrs) == 0 {
			continue
		}
		t := rrs[0].Header().Rrtype
		if pa != nil {
			if old := pa.get(t); sameRRs(old, rrs) {
				rrs = old
			}
		}
		set := rrset{rtype: t}
		set.setList(rrs)
		sets = append(sets, set)
	}
	sortSets(sets)
	apex.rrsets = sets
	apex.sig = nil // signed again (signatures kept where fresh)
}

// sameRRs reports whether a and b hold equal records, TTLs included, in
// the same order.
func sameRRs(a, b []dns.RR) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Header().Ttl != b[i].Header().Ttl || !dns.IsDuplicate(a[i], b[i]) {
			return false
		}
	}
	return true
}

// freshNode reports whether every RRset n signs has signatures fresh at
// now by z's signer.
func (z *Zone) freshNode(n *node, now time.Time) bool {
	if n.sig == nil || len(n.sig.sets) != len(n.rrsets) {
		return false
	}
	for i, s := range n.rrsets {
		if !n.signs(s.rtype) {
			if n.sig.sets[i] != nil {
				return false
			}
			continue
		}
		if !z.signer.Fresh(n.sig.sets[i], s.rtype, now) {
			return false
		}
	}
	return true
}

// signNodes signs the RRsets of nodes (z's own, not published), each
// one's signatures kept from the served zone's same RRset where fresh,
// on workers goroutines.
func (z *Zone) signNodes(nodes []*node, now time.Time, workers int, why dnssec.Reason) error {
	workers = max(1, min(workers, len(nodes)/64))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		part := nodes[w*len(nodes)/workers : (w+1)*len(nodes)/workers]
		wg.Go(func() {
			for _, n := range part {
				if err := z.signNode(n, now, why); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// signNode gives n (z's own) its signatures: those of the RRset it had
// before (its own sig, or the served zone's node of that name) when
// they cover the very same records and are fresh, new ones otherwise.
func (z *Zone) signNode(n *node, now time.Time, why dnssec.Reason) error {
	old := n
	if z.prev != nil && (n.sig == nil || len(n.sig.sets) != len(n.rrsets)) {
		if pn := z.prev.nodes.get(n.name); pn != nil {
			old = pn
		}
	}
	sets := make([][]dns.RR, len(n.rrsets))
	for i, s := range n.rrsets {
		if !n.signs(s.rtype) {
			continue
		}
		if sigs := old.keptSigs(s, z.signer, now); sigs != nil {
			sets[i] = sigs
			continue
		}
		sigs, err := z.signer.Sign(s.records(n.name), now, why)
		if err != nil {
			return err
		}
		sets[i] = sigs
	}
	n.sig = &nodeSigs{sets: sets}
	return nil
}

// keptSigs returns n's signatures of the RRset s when n holds the very
// same records and they are fresh at now, else nil.
func (n *node) keptSigs(s rrset, signer *dnssec.Signer, now time.Time) []dns.RR {
	if n.sig == nil {
		return nil
	}
	for i := range n.rrsets {
		if n.rrsets[i].rtype != s.rtype {
			continue
		}
		if i >= len(n.sig.sets) || !sameSet(&n.rrsets[i], &s) {
			return nil
		}
		if sigs := n.sig.sets[i]; signer.Fresh(sigs, s.rtype, now) {
			return sigs
		}
		return nil
	}
	return nil
}

// negSOASigs are the RRSIGs of the SOA with the TTL of the SOA of
// negative answers (RFC 4035 §3.1.3: the SOA and its RRSIGs).
func negSOASigs(z *Zone) []dns.RR {
	sigs := z.apex.sigsOf(dns.TypeSOA)
	if len(sigs) == 0 || z.NegSOA == nil {
		return nil
	}
	out := make([]dns.RR, len(sigs))
	for i, rr := range sigs {
		c := *rr.(*dns.RRSIG)
		c.Hdr.Ttl = z.NegSOA.Hdr.Ttl
		out[i] = &c
	}
	return out
}

// Signed reports whether z is a signed zone: signed by steer (Sign) or
// signed elsewhere (Presigned). Its answers with DO carry RRSIGs.
func (z *Zone) Signed() bool { return z.signer != nil || z.pre != nil }

// SignatureTimes returns, for a signed zone, the earliest point (Unix
// seconds) at which one of its signatures is due for renewal, and the
// earliest expiration among them; 0, 0 for an unsigned zone. The
// signatures of steered answers are not the zone's.
func (z *Zone) SignatureTimes() (refresh, expire uint32) {
	if z.signer == nil || z.Failed != "" || z.pre != nil {
		return 0, 0
	}
	r := z.signer.Options().Refresh
	for _, n := range z.nodes.all {
		z.eachSig(n, func(sig *dns.RRSIG) {
			if at := dnssec.RefreshAt(sig, r); refresh == 0 || at < refresh {
				refresh = at
			}
			if expire == 0 || sig.Expiration < expire {
				expire = sig.Expiration
			}
		})
	}
	return refresh, expire
}

// eachSig calls f with every signature of node n (z's apex when n is
// the index's entry for the origin).
func (z *Zone) eachSig(n *node, f func(*dns.RRSIG)) {
	if n.name == z.Origin {
		n = z.apex
	}
	if n.sig == nil {
		return
	}
	for _, sigs := range n.sig.sets {
		for _, rr := range sigs {
			f(rr.(*dns.RRSIG))
		}
	}
}

// Resigned returns z when none of its signatures is due for renewal at
// now, else a new, unpublished zone holding z's records in which the
// signatures due are made anew (dnssec.ReasonRenew), on workers
// goroutines: it shares every other node with z, and Set.Precompile
// packs only the nodes whose signatures changed (and those whose
// answers carry other names' addresses). z is left as it is.
func (z *Zone) Resigned(now time.Time, workers int) (*Zone, error) {
	if z.signer == nil || z.Failed != "" || !z.precompiled || z.pre != nil {
		return z, nil
	}
	var due []*node
	for _, n := range z.nodes.all {
		if n.name == z.Origin {
			n = z.apex
		}
		if !z.freshNode(n, now) {
			due = append(due, n)
		}
	}
	if len(due) == 0 {
		return z, nil
	}
	nz := *z
	nz.nodes = z.nodes.clone()
	nz.nodes.put(z.apex) // WithSerial's apex, if z is its zone
	nz.prev, nz.precompiled, nz.apexOnly, nz.workers = z, false, false, int32(min(workers, 1<<30))
	nz.base = z.Base()
	for i, n := range due {
		c := nz.own(n)
		if n == z.apex {
			nz.apex = c
		}
		due[i] = c
	}
	if err := nz.signNodes(due, now, workers, dnssec.ReasonRenew); err != nil {
		return nil, err
	}
	nz.negSigs = negSOASigs(&nz)
	return &nz, nil
}

// signedSets counts the RRsets of z a signer signs.
func (z *Zone) signedSets() int {
	count := 0
	for _, n := range z.nodes.all {
		if n.name == z.Origin {
			n = z.apex
		}
		for _, s := range n.rrsets {
			if n.signs(s.rtype) {
				count++
			}
		}
	}
	return count
}

// sigsFor returns copies of sigs with owner name, for an answer a
// wildcard synthesised (RFC 4035 §3.1.3.3: the RRSIG's label count tells
// the validator so).
func sigsFor(sigs []dns.RR, name string) []dns.RR {
	out := make([]dns.RR, len(sigs))
	for i, rr := range sigs {
		c := *rr.(*dns.RRSIG)
		c.Hdr.Name = name
		out[i] = &c
	}
	return out
}

// steeredSigs adds the RRSIGs of rrs, the RRset a Steering answered the
// steered name of z with, to a's answer: from the server's Signing (the
// snapshot pre-signs every answer set a record can give), or, when it
// has none and may make none now, NeedSignature.
func (z *Zone) steeredSigs(a *Answer, name string, rrs []dns.RR) {
	if len(rrs) == 0 {
		return
	}
	var sigs []dns.RR
	if a.opts.Signing != nil {
		sigs = a.opts.Signing.Steered(z, name, rrs[0].Header().Rrtype, rrs)
	}
	if sigs == nil {
		a.NeedSignature = true
		return
	}
	a.Answer = append(a.Answer, sigs...)
}

// answerRRSIG answers a query of type RRSIG with DO at n, a node of a
// signed zone (synthesized: a wildcard answering name), with every RRSIG
// the zone made there, as BIND and Knot answer it: the type exists at
// every signed name, so a denial of it would contradict the NSEC
// bitmaps. It reports false when n holds none.
func (z *Zone) answerRRSIG(a *Answer, n *node, name string, synthesized bool) bool {
	if n.sig == nil {
		return false
	}
	start := len(a.Answer)
	for _, sigs := range n.sig.sets {
		if synthesized {
			sigs = sigsFor(sigs, name)
		}
		a.Answer = append(a.Answer, sigs...)
	}
	return len(a.Answer) > start
}
