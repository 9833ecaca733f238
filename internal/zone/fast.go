package zone

import (
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/miekg/dns"
)

// This file serves the query fast path: a lookup that neither allocates
// nor follows chains, and answers precompiled to wire format. Whatever it
// cannot answer exactly (CNAME and DNAME chains, wildcards, referrals,
// ANY, DS) it leaves to Lookup.

// Node is a name in a zone, as the fast path sees it.
type Node = node

// FastKind says how the fast path may answer a name.
type FastKind uint8

// The outcomes of Classify.
const (
	// FastNone: only the general lookup answers this name exactly.
	FastNone FastKind = iota
	// FastNode: the name exists as a plain node (no delegation, CNAME or
	// DNAME on the way); see Node.Template and Node.Steered.
	FastNode
	// FastNXDomain: the name does not exist and no wildcard covers it.
	FastNXDomain
)

// Classify finds name (lower case, absolute, presentation form without
// escapes) for the fast path. It does not allocate.
func (s *Set) Classify(name string) (FastKind, *Zone, *Node) {
	z := s.Find(name)
	// A failed zone has no apex: the general path answers its SERVFAIL.
	if z == nil || z.apex == nil || z.Origin == "." {
		return FastNone, nil, nil
	}
	cur := z.apex
	// name[:rest] holds the labels below cur, each followed by its dot.
	for rest := len(name) - len(z.Origin); rest > 0; {
		if cur != z.apex && cur.cut || cur.hasDNAME {
			return FastNone, z, nil
		}
		j := strings.LastIndexByte(name[:rest-1], '.') + 1
		n := z.nodes.get(name[j:])
		if n == nil {
			if cur.wildChild {
				return FastNone, z, nil // RFC 4592 synthesis: the general path
			}
			return FastNXDomain, z, nil
		}
		cur, rest = n, j
	}
	if !cur.plain {
		return FastNone, z, nil
	}
	return FastNode, z, cur
}

// Steered reports whether the node's address records come from steering.
func (n *node) Steered() bool { return n.steered }

// Name returns the node's owner name (canonical).
func (n *node) Name() string { return n.name }

// Template returns the precompiled positive answer for qtype at this node,
// as the general path packs it but without its question: the 12-byte
// header (QR, AA, the counts), then the answer, authority and additional
// sections (no OPT), whose compression pointers into the question hold
// for any query whose question names this node in any case. The caller
// puts the query's own question between the two. It is nil when the
// node has no RRset of that type or the answer is not precompiled.
func (n *node) Template(qtype uint16) []byte {
	for i := range n.templates() {
		if t := &n.templates()[i]; t.qtype == qtype {
			return t.bytes()
		}
	}
	return nil
}

// template is one precompiled answer: its bytes as a pointer and a
// length, 16 bytes where a slice beside the type took 32 (a 1 M-record
// zone holds a million).
// templates returns the node's precompiled answers.
func (n *node) templates() []template {
	if n.tpl == nil {
		return nil
	}
	return unsafe.Slice(n.tpl, n.ntpl)
}

// setTemplates makes ts the node's precompiled answers; ts must not
// be longer than 255.
func (n *node) setTemplates(ts []template) {
	n.tpl, n.ntpl = nil, 0
	if len(ts) > 0 {
		n.tpl, n.ntpl = &ts[0], uint8(len(ts))
	}
}

type template struct {
	wire  *byte
	n     uint32
	qtype uint16
}

func mkTemplate(qtype uint16, wire []byte) template {
	if len(wire) == 0 {
		return template{qtype: qtype}
	}
	return template{wire: &wire[0], n: uint32(len(wire)), qtype: qtype}
}

// bytes returns the template's answer (nil when empty).
func (t *template) bytes() []byte {
	if t.wire == nil {
		return nil
	}
	return unsafe.Slice(t.wire, t.n)
}

// NegativeSOA is the SOA of negative answers, split for the fast path,
// which writes it with the same name compression as the general path.
type NegativeSOA struct {
	Apex, Mname, Rname string // presentation form
	TTL                uint32
	// Tail is the SOA's serial, refresh, retry, expire and minimum.
	Tail [20]byte
	// OK is false when a name needs escapes, which the fast path does not
	// write: negative answers for the zone then take the general path.
	OK bool
}

// Negative returns the zone's negative-answer SOA for the fast path.
func (z *Zone) Negative() *NegativeSOA { return &z.negWire }

// Precompile packs every plain RRset of every zone of the set into a wire
// template, as the general path would answer it. It must run before the
// set is published (after MarkSteered). A zone parsed with workers packs
// its nodes on that many goroutines; one parsed with a Previous zone keeps
// the templates of RRsets it shares with it. Many small zones are packed
// on every core (see PrecompileOn).
func (s *Set) Precompile() { s.PrecompileOn(runtime.GOMAXPROCS(0)) }

// PrecompileOn is Precompile on at most workers goroutines for the small
// zones of a set that holds many of them (a hosting provider's 100,000
// zones of ten records took 2 s on one core at start); a set of few zones
// is precompiled one zone after another, its large zones each on the
// workers its parse had, as before.
func (s *Set) PrecompileOn(workers int) {
	if workers = s.manyWorkers(workers); workers > 1 {
		s.precompileMany(workers)
		return
	}
	s.precompileSerial()
}

// precompileSerial precompiles the set's zones one after another, each
// whole (packed, stored, compacted) before the next.
func (s *Set) precompileSerial() {
	// Small zones' templates share the blocks of one packer, which grow
	// to arenaBlock: one packer each left a 512-byte block and a block
	// of templates partly empty in each of a hosting provider's 100,000
	// zones of ten records. A block lives while any zone packed into it
	// does, so a reload that packs some of them again holds their old
	// templates until their neighbours' are replaced too: at most one
	// old copy of each zone's templates (those packed by a reload share
	// the reload's blocks, let go with the next change).
	small := packer{s: s, seen: map[string][]byte{}}
	defer small.release()
	var dense compactor
	for _, z := range s.list {
		if z.Failed != "" || z.precompiled {
			continue // no data to compile (SERVFAIL), or kept from a reload and published
		}
		j := z.prepare()
		s.pack(&j, &small)
		j.finish(&dense)
	}
}

// minZonesPerWorker is the fewest small zones to pack that make a
// Precompile worker of their own: below it, a goroutine's blocks (a
// packer's and a compactor's, partly empty) cost more than its share of
// the work, a few milliseconds.
const minZonesPerWorker = 1024

// manyWorkers returns how many goroutines Precompile packs the set's
// small zones on, at most workers: 1 (one zone after another) unless the
// set has minZonesPerWorker of them to pack for each.
func (s *Set) manyWorkers(workers int) int {
	if workers <= 1 || len(s.list) < 2*minZonesPerWorker {
		return 1
	}
	small := 0
	for _, z := range s.list {
		if z.Failed == "" && !z.precompiled && (z.apexOnly || z.nodes.len() <= smallZoneNodes) {
			small++
		}
	}
	return max(1, min(workers, small/minZonesPerWorker))
}

// precompileMany precompiles the set's zones on workers goroutines. A
// zone's packing looks names up in the set, and a name of its own is
// answered by it or by a zone hosted below it (a child zone, delegated or
// not): so a zone no other zone of the set is above is read by its own
// packing only, and is prepared, packed and finished on one goroutine at
// once (a hosting provider's zones, while their data is in the cache). A
// zone below another of the set is prepared before any zone is packed,
// and finished (its RRsets stored in wire form, its nodes copied into
// shared blocks, which lookups read) once every zone is packed; its
// packing writes only its templates and plain flags, which lookups do
// not read. Large zones are packed and finished one after another, each
// on the goroutines its parse had. Each worker has its own packer (its
// blocks and its map of the answers zones share byte for byte) and its
// own compactor; the answers are the same bytes as one zone after
// another (TestPrecompileManyAsSerial).
func (s *Set) precompileMany(workers int) {
	jobs := make([]precompileJob, len(s.list))
	todo := func(z *Zone) bool { return z.Failed == "" && !z.precompiled }
	// below[i]: another zone of the set is above zone i; large[i]: zone
	// i is packed on its own goroutines.
	below, large := make([]bool, len(s.list)), make([]bool, len(s.list))
	for i, z := range s.list {
		below[i] = s.hostsAbove(z.Origin)
		large[i] = !z.apexOnly && z.nodes.len() > smallZoneNodes
	}
	parallelZones(len(jobs), workers, func(_, i int) {
		if z := s.list[i]; todo(z) && (below[i] || large[i]) {
			jobs[i] = z.prepare()
		}
	})
	packers := make([]packer, workers)
	for w := range packers {
		packers[w] = packer{s: s, seen: map[string][]byte{}}
	}
	for i := range jobs {
		if j := &jobs[i]; j.z != nil && large[i] {
			s.pack(j, &packers[0]) // few nodes to pack again: with the small zones' packer
		}
	}
	dense := make([]compactor, workers)
	parallelZones(len(jobs), workers, func(w, i int) {
		if z := s.list[i]; todo(z) && !below[i] && !large[i] {
			j := z.prepare()
			s.pack(&j, &packers[w])
			j.finish(&dense[w])
		} else if j := &jobs[i]; j.z != nil && !large[i] {
			s.pack(j, &packers[w])
		}
	})
	for w := range packers {
		packers[w].release()
	}
	for i := range jobs {
		if j := &jobs[i]; j.z != nil && large[i] {
			j.finish(&dense[0])
		}
	}
	parallelZones(len(jobs), workers, func(w, i int) {
		if j := &jobs[i]; j.z != nil && !large[i] {
			j.finish(&dense[w])
		}
	})
}

// hostsAbove reports whether a zone of the set is above origin (holds
// it as a name below its own origin).
func (s *Set) hostsAbove(origin string) bool {
	if origin == "." {
		return false
	}
	for off, end := dns.NextLabel(origin, 0); !end; off, end = dns.NextLabel(origin, off) {
		if s.zones[origin[off:]] != nil {
			return true
		}
	}
	return s.zones["."] != nil
}

// parallelZones calls f(w, i) for each i below n on workers goroutines
// (w is the goroutine's number), each taking the next run of zones in
// turn: neighbours in the configuration share their blocks, as one
// after another.
func parallelZones(n, workers int, f func(w, i int)) {
	const run = precompileRun
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				end := int(next.Add(run))
				if end-run >= n {
					return
				}
				for i := end - run; i < min(end, n); i++ {
					f(w, i)
				}
			}
		})
	}
	wg.Wait()
}

// precompileRun is how many zones, one after another in the set, a
// Precompile worker takes at a time.
const precompileRun = 64

// precompileJob is one zone's work in Precompile: the nodes to pack.
type precompileJob struct {
	z     *Zone
	nodes []*node
	// workers is how many goroutines pack and store a large zone.
	workers int
	// apexOnly: a zone WithSerial made, whose apex is all to pack.
	apexOnly bool
}

// small reports whether the job's zone is packed with other small zones'
// (or is an apex alone).
func (j *precompileJob) small() bool {
	return j.apexOnly || len(j.nodes) <= smallZoneNodes
}

// prepare marks z precompiled and lists the nodes to pack, making its
// own those it borrowed from the served zone that it packs again; it
// writes z only, and looks nothing up.
func (z *Zone) prepare() precompileJob {
	z.precompiled = true
	z.negWire = negativeSOA(z)
	if z.apexOnly {
		z.apexOnly = false
		return precompileJob{z: z, nodes: []*node{z.apex}, workers: 1, apexOnly: true}
	}
	wild := map[string]bool{}
	for name := range z.nodes.all {
		if strings.HasPrefix(name, "*.") {
			wild[name[2:]] = true
		}
	}
	// The nodes to pack: this zone's own, and copies of borrowed
	// ones (the served zone's) whose templates or flags would differ
	// here; the others stay as they are, templates and all.
	var nodes []*node
	if !z.incremental {
		nodes = make([]*node, 0, z.nodes.len())
	} // else the changed chunks' few: a list for all would be 6 MB at 1 M records
	// A zone built from the changed chunks of its file knows which
	// names changed (its own nodes, and those gone): a borrowed node
	// whose templates hold other names' data is packed again only
	// when one of those changed. Otherwise every such node is.
	var changed map[string]bool
	var deps []*node
	if z.incremental {
		changed = make(map[string]bool, len(z.gone))
		for _, name := range z.gone {
			changed[name] = true
		}
	}
	// The index of a zone built from the served one is mostly a copy
	// of it, slot for slot: a node in the same slot as the served
	// zone's is borrowed without a look-up.
	var same []*node
	if z.prev != nil && len(z.prev.nodes.slots) == len(z.nodes.slots) {
		same = z.prev.nodes.slots
	}
	for i, n := range z.nodes.slots {
		if n == nil {
			continue
		}
		name := n.name
		if same != nil && same[i] == n || z.borrowed(n) {
			if n.wildChild == wild[name] && (n.sig != nil) == z.Signed() {
				if !n.dependent() {
					continue
				}
				if changed != nil {
					deps = append(deps, n)
					continue
				}
			}
			n = z.own(n)
		} else if changed != nil && z.moved(n) {
			changed[name] = true
		}
		if !z.Signed() {
			n.sig = nil // signed in the served zone, no longer
		}
		n.wildChild = wild[name]
		nodes = append(nodes, n)
	}
	for _, n := range deps {
		if n.refersTo(changed) {
			nodes = append(nodes, z.own(n))
		}
	}
	return precompileJob{z: z, nodes: nodes, workers: max(1, min(int(z.workers), len(nodes)/4096))}
}

// pack makes the templates of the job's nodes: a small zone's with the
// packer small (nil only for a large zone), a large zone's on its own
// goroutines. It writes the job's nodes only.
func (s *Set) pack(j *precompileJob, small *packer) {
	z, nodes := j.z, j.nodes
	if j.apexOnly {
		p := packer{s: s, z: z}
		p.node(z.apex)
		p.release()
		return
	}
	if len(nodes) <= smallZoneNodes {
		small.z = z
		for _, n := range nodes {
			small.node(n)
		}
		small.z = nil
		return
	}
	var wg sync.WaitGroup
	for w := range j.workers {
		part := nodes[w*len(nodes)/j.workers : (w+1)*len(nodes)/j.workers]
		wg.Go(func() {
			p := packer{s: s, z: z}
			for _, n := range part {
				p.node(n)
			}
			p.release()
		})
	}
	wg.Wait()
}

// finish stores the job's RRsets that its templates hold in wire form,
// lets the zone's text go and copies a small zone parsed anew into the
// compactor dense: once every zone of the set that may look up its names
// is packed.
func (j *precompileJob) finish(dense *compactor) {
	z, nodes := j.z, j.nodes
	if j.apexOnly {
		z.dropSource()
		return
	}
	if z.signer == nil && z.pre == nil && z.steerSigner == nil {
		// Once every template is made (a template may hold other
		// nodes' records), on the same goroutines; a small zone's
		// on this one (a goroutine each cost 100,000 zones more
		// than their stores).
		if j.workers == 1 {
			for _, n := range nodes {
				z.storeNode(n)
			}
		} else {
			var wg sync.WaitGroup
			for w := range j.workers {
				part := nodes[w*len(nodes)/j.workers : (w+1)*len(nodes)/j.workers]
				wg.Go(func() {
					for _, n := range part {
						z.storeNode(n)
					}
				})
			}
			wg.Wait()
		}
	}
	// A zone parsed anew is copied out of its parse's garbage (see
	// compact.go); one parsed with the served zone holds that
	// zone's nodes where they did not change, shared as they are.
	fresh := z.prev == nil
	z.prev, z.workers = nil, 0
	z.dropSource()
	if fresh && z.compactable() {
		dense.zone(z)
	}
}

// smallZoneNodes is the most nodes a zone packs with the other small
// zones' (see Precompile).
const smallZoneNodes = 64

// packer makes the templates of one goroutine's share of a zone's nodes
// (or of many small zones), their bytes cut from large blocks rather than
// allocated one by one.
type packer struct {
	s         *Set
	z         *Zone
	scratch   []byte
	out       []byte
	msg       dns.Msg
	ans       Answer
	arena     []byte
	templates []template
	// seen, when not nil, holds the answers kept so far but addresses
	// (see keepShared), at most maxSeen.
	seen map[string][]byte
}

// maxSeen is the most answers a packer of small zones remembers.
const maxSeen = 4096

// packBuffers holds the packers' scratch buffers (two of 64 KiB each),
// so that precompiling many small zones does not allocate them per zone.
var packBuffers = sync.Pool{New: func() any {
	return &[2][]byte{make([]byte, dns.MaxMsgSize), make([]byte, 0, dns.MaxMsgSize)}
}}

// release gives the packer's scratch buffers back to packBuffers.
func (p *packer) release() {
	if p.scratch != nil && cap(p.out) >= dns.MaxMsgSize {
		packBuffers.Put(&[2][]byte{p.scratch, p.out[:0]})
	}
	p.scratch, p.out = nil, nil
	p.ans = Answer{} // nor hold the records it answered last
}

// arenaBlock is the size of the largest blocks templates are cut from
// (nextBlock: a small zone's are small).
const arenaBlock = 64 << 10

func (p *packer) node(n *node) {
	n.setTemplates(nil)
	if n.sig != nil {
		n.sig.templates = nil
	}
	n.plain = !(n.cut || n.occluded || n.hasCNAME || n.hasDNAME)
	if !n.plain {
		return
	}
	defer p.nodeDO(n)
	var pn *node
	if p.z.prev != nil {
		pn = p.z.prev.nodes.get(n.name)
	}
	count := 0
	for _, rs := range n.rrsets {
		if !(n.steered && (rs.rtype == dns.TypeA || rs.rtype == dns.TypeAAAA)) && rs.rtype != dns.TypeDS {
			count++
		}
	}
	if count == 0 {
		return
	}
	if count > 255 {
		n.plain = false // more types than a node's count holds: the general way
		return
	}
	if len(p.templates)+count > cap(p.templates) {
		p.templates = make([]template, 0, nextBlock(cap(p.templates), 8, 256, count))
	}
	start := len(p.templates)
	for _, rs := range n.rrsets {
		if n.steered && (rs.rtype == dns.TypeA || rs.rtype == dns.TypeAAAA) {
			continue
		}
		if rs.rtype == dns.TypeDS {
			continue // DS may be answered from a parent zone
		}
		var wire []byte
		if direct[rs.rtype] {
			if rs.inWire() {
				wire = rs.wireBytes() // kept in wire form: that is its answer
			} else if pn != nil && pn.plain && sameSet(pn.set(rs.rtype), &rs) {
				wire = pn.Template(rs.rtype)
			}
			if wire == nil {
				wire = p.direct(n.name, rs.records(n.name))
			}
		} else {
			wire = p.looked(n.name, rs.rtype, nil)
		}
		if wire == nil {
			n.plain = false // answer it the general way
			continue
		}
		p.templates = append(p.templates, mkTemplate(rs.rtype, wire))
	}
	n.setTemplates(p.templates[start:len(p.templates):len(p.templates)])
	if pn != nil && pn.ntpl == n.ntpl {
		for i, t := range n.templates() {
			if pt := pn.templates()[i]; pt.qtype != t.qtype || pt.wire == nil || pt.wire != t.wire {
				return
			}
		}
		n.tpl = pn.tpl // all the previous zone's: share the list too
		p.templates = p.templates[:start]
	}
}

// looked packs the answer to (name, qtype) as the general lookup makes
// it (with the DNSSEC wishes o), without its question; nil when it is no
// positive answer.
func (p *packer) looked(name string, qtype uint16, o *LookupOptions) []byte {
	// The answer's and the message's slices are the packer's, used again
	// (a small zone's NS, MX and SOA are three lookups each).
	a := &p.ans
	p.s.LookupWith(a, name, qtype, nil, o)
	m := &p.msg
	m.MsgHdr = dns.MsgHdr{Response: true, Authoritative: a.Authoritative, Rcode: a.Rcode}
	m.Compress = true
	m.Question = append(m.Question[:0], dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET})
	m.Answer, m.Ns, m.Extra = a.Answer, a.Ns, a.Extra
	if p.scratch == nil {
		b := packBuffers.Get().(*[2][]byte)
		p.scratch, p.out = b[0], b[1][:0]
	}
	w, err := m.PackBuffer(p.scratch) // into the scratch buffer: what is kept is copied
	m.Answer, m.Ns, m.Extra, m.Compress = nil, nil, nil, false
	if err == nil && !a.Referral && len(a.Answer) > 0 {
		if end := questionEnd(w); end > 0 {
			p.out = append(append(p.out[:0], w[:12]...), w[end:]...)
			return p.keepShared(p.out)
		}
	}
	return nil
}

// nodeDO makes the DO templates of a plain node of a signed zone, one
// per template its answers without DO have (see TemplateDO); an RRset
// whose records and signatures are the served zone's keeps its template.
func (p *packer) nodeDO(n *node) {
	if !n.plain || n.sig == nil || !p.z.Signed() || n.ntpl == 0 {
		return
	}
	var pn *node
	if p.z.prev != nil {
		pn = p.z.prev.nodes.get(n.name)
	}
	tpls := make([]template, 0, n.ntpl)
	for _, t := range n.templates() {
		rrs, sigs := n.get(t.qtype), n.sigsOf(t.qtype)
		if len(sigs) == 0 {
			continue
		}
		var wire []byte
		if direct[t.qtype] {
			if pn != nil && pn.plain && sameSet(pn.set(t.qtype), n.set(t.qtype)) && sameSlice(pn.sigsOf(t.qtype), sigs) {
				wire = pn.TemplateDO(t.qtype)
			}
			if wire == nil {
				set := make([]dns.RR, 0, len(rrs)+len(sigs))
				wire = p.direct(n.name, append(append(set, rrs...), sigs...))
			}
		} else {
			wire = p.looked(n.name, t.qtype, &LookupOptions{DO: true})
		}
		if wire != nil {
			tpls = append(tpls, mkTemplate(t.qtype, wire))
		}
	}
	n.sig.templates = tpls
}

// dependent reports whether a template of n may hold other nodes' data
// (the addresses of NS, MX, SRV, SVCB and HTTPS targets): one that is not
// packed straight from its own RRset.
func (n *node) dependent() bool {
	if n.cut || n.occluded || n.hasCNAME || n.hasDNAME {
		return false // no templates
	}
	for _, rs := range n.rrsets {
		switch rs.rtype {
		case dns.TypeNS, dns.TypeMX, dns.TypeSRV, dns.TypeSVCB, dns.TypeHTTPS:
			return true
		}
	}
	return false
}

// moved reports whether what another node's template may hold of the
// node n (its addresses, whether it is glue) differs from the served
// zone's node of that name. RRsets a reload found unchanged are the
// served zone's very slices.
func (z *Zone) moved(n *node) bool {
	pn := z.prev.nodes.get(n.name)
	if pn == nil {
		return true
	}
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSVCB, dns.TypeHTTPS} {
		a, b := n.set(t), pn.set(t)
		if (a == nil) != (b == nil) || a != nil && !sameSet(a, b) {
			return true
		}
	}
	return n.occluded != pn.occluded || n.cut != pn.cut
}

// refersTo reports whether a template of the dependent node n may hold
// the data of a name in names: an NS, MX or SRV target there, or any
// SVCB or HTTPS record (whose AliasMode targets lead further).
func (n *node) refersTo(names map[string]bool) bool {
	for _, rs := range n.rrsets {
		for _, rr := range rs.list() {
			var target string
			switch rr := rr.(type) {
			case *dns.NS:
				target = rr.Ns
			case *dns.MX:
				target = rr.Mx
			case *dns.SRV:
				target = rr.Target
			case *dns.SVCB, *dns.HTTPS:
				return true
			default:
				continue
			}
			if names[target] || names[dns.CanonicalName(target)] {
				return true
			}
		}
	}
	return false
}

// direct lists the types whose answer at a plain node is the RRset alone
// (no additional section) and whose data holds no names to compress: their
// template is packed straight from the RRset, without a lookup.
var direct = map[uint16]bool{
	dns.TypeA: true, dns.TypeAAAA: true, dns.TypeTXT: true, dns.TypeSPF: true,
	dns.TypeCAA: true, dns.TypeSSHFP: true, dns.TypeTLSA: true, dns.TypeHINFO: true,
	dns.TypeLOC: true, dns.TypeDNSKEY: true, dns.TypeOPENPGPKEY: true,
}

// direct packs the answer to (name, type of rrs) as Msg.Pack would: the
// header with QR and AA, the question, and the RRset with its owner
// compressed to the question's name. The message is packed without
// compression (Msg.Pack then builds no map, and unlike PackRR it writes
// nothing into the records, which the general path may be packing at the
// same time) and each owner is then cut down to a pointer. It returns nil
// when the answer would not fit a DNS message.
func (p *packer) direct(name string, rrs []dns.RR) []byte {
	if w := p.addresses(rrs); w != nil {
		return w
	}
	if p.scratch == nil {
		b := packBuffers.Get().(*[2][]byte)
		p.scratch, p.out = b[0], b[1][:0]
	}
	p.msg.MsgHdr = dns.MsgHdr{Response: true, Authoritative: true}
	p.msg.Question = append(p.msg.Question[:0], dns.Question{Name: name, Qtype: rrs[0].Header().Rrtype, Qclass: dns.ClassINET})
	p.msg.Answer = rrs
	w, err := p.msg.PackBuffer(p.scratch)
	p.msg.Answer = nil
	if err != nil {
		return nil
	}
	// The question's name (uncompressed), which each owner repeats.
	owner := 0
	for off := 12; off < len(w); off += int(w[off]) + 1 {
		if w[off] == 0 {
			owner = off + 1 - 12
			break
		}
	}
	qend := 12 + owner + 4
	if owner == 0 || qend > len(w) {
		return nil
	}
	out := append(p.out[:0], w[:12]...)
	for off := qend; off < len(w); {
		if off+owner+10 > len(w) {
			return nil
		}
		rd := off + owner + 10
		end := rd + (int(w[rd-2])<<8 | int(w[rd-1]))
		if end > len(w) {
			return nil
		}
		out = append(out, 0xC0, 12)
		out = append(out, w[off+owner:end]...)
		off = end
	}
	p.out = out
	return p.keepShared(out)
}

// questionEnd returns where the question of the packed message w ends
// (its name is never compressed: nothing comes before it), or 0.
func questionEnd(w []byte) int {
	for off := 12; off < len(w); off += int(w[off]) + 1 {
		if w[off] == 0 {
			if off+5 > len(w) {
				return 0
			}
			return off + 5
		}
		if w[off]&0xC0 != 0 {
			return 0
		}
	}
	return 0
}

// addresses packs an A or AAAA RRset's template by hand, which is most of
// a zone's: the header and, per record, a pointer to the question, type,
// class, TTL and the address. It returns nil for other types.
func (p *packer) addresses(rrs []dns.RR) []byte {
	size := 4
	switch rrs[0].(type) {
	case *dns.A:
	case *dns.AAAA:
		size = 16
	default:
		return nil
	}
	out := append(p.out[:0], 0, 0, 0x84, 0, 0, 1, byte(len(rrs)>>8), byte(len(rrs)), 0, 0, 0, 0)
	for _, rr := range rrs {
		var ip net.IP
		switch r := rr.(type) {
		case *dns.A:
			ip = r.A.To4()
		case *dns.AAAA:
			ip = r.AAAA.To16()
		}
		if len(ip) != size {
			return nil
		}
		h := rr.Header()
		out = append(out, 0xC0, 12, byte(h.Rrtype>>8), byte(h.Rrtype), 0, byte(dns.ClassINET),
			byte(h.Ttl>>24), byte(h.Ttl>>16), byte(h.Ttl>>8), byte(h.Ttl), 0, byte(size))
		out = append(out, ip...)
	}
	p.out = out
	return p.keep(out)
}

// keep copies w into the packer's arena.
func (p *packer) keep(w []byte) []byte {
	if len(w) > arenaBlock/4 {
		return append([]byte(nil), w...)
	}
	if len(p.arena)+len(w) > cap(p.arena) {
		p.arena = make([]byte, 0, nextBlock(cap(p.arena), 512, arenaBlock, len(w)))
	}
	start := len(p.arena)
	p.arena = append(p.arena, w...)
	return p.arena[start:len(p.arena):len(p.arena)]
}

// keepShared is keep for an answer that other zones may have byte for
// byte: a hosting provider's zones mostly have the same NS RRset, SOA
// names, SPF TXT record, MX target under their own name (a template names
// its owner by a pointer to the question, so that such answers are the
// same bytes in every zone). The packer of small zones keeps one copy of
// each, 200 bytes a zone of ten records. Answers of addresses, unique to
// a host, are never looked for: they would fill seen.
func (p *packer) keepShared(w []byte) []byte {
	if p.seen == nil {
		return p.keep(w)
	}
	if k, ok := p.seen[string(w)]; ok {
		return k
	}
	k := p.keep(w)
	if len(p.seen) < maxSeen && len(k) > 0 {
		p.seen[unsafe.String(&k[0], len(k))] = k // never written again
	}
	return k
}

// sameSlice reports whether a and b are the very same records.
func sameSlice(a, b []dns.RR) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

func negativeSOA(z *Zone) NegativeSOA {
	soa := z.NegSOA
	if soa == nil {
		return NegativeSOA{}
	}
	ns := NegativeSOA{Apex: z.Origin, Mname: soa.Ns, Rname: soa.Mbox, TTL: soa.Hdr.Ttl}
	t := ns.Tail[:0]
	for _, v := range []uint32{soa.Serial, soa.Refresh, soa.Retry, soa.Expire, soa.Minttl} {
		t = append(t, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	ns.OK = plainName(ns.Apex) && plainName(ns.Mname) && plainName(ns.Rname)
	return ns
}

// plainName reports whether a presentation name has no escapes.
func plainName(s string) bool {
	return !strings.ContainsRune(s, '\\') && dns.IsFqdn(s)
}
