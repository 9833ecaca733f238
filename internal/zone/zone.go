// Package zone owns authoritative zone data: reading RFC 1035 master files,
// checking them (every problem as file:line), and answering a query from an
// immutable, indexed zone by the rules of RFC 1034 §4.3.2, RFC 2308
// (negative answers), RFC 4592 (wildcards) and RFC 6672 (DNAME). A signed
// zone (Sign) answers queries with DO with the RRSIGs it made at load and
// proves what does not exist with compact denial (RFC 9824, denial.go).
//
// A Zone never changes after Load returns; a reload builds a new one.
package zone

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"time"
	"unsafe"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/dnssec"
)

// Zone is one loaded, checked and indexed zone.
type Zone struct {
	// Origin is the zone apex in canonical (lower case, absolute) form.
	Origin string
	// File is the master file it was read from.
	File string
	// SOA is the apex SOA record.
	SOA *dns.SOA
	// NegSOA is the SOA put in the authority section of negative answers:
	// its TTL is min(SOA TTL, SOA MINIMUM) (RFC 2308 §3).
	NegSOA *dns.SOA
	// Records is the number of resource records loaded.
	Records int
	// Failed, when not empty, says why the zone could not be loaded (see
	// NewFailed): the zone has no data, and every query for a name in it
	// is answered SERVFAIL, as Knot and NSD answer for a zone that failed
	// to load. It is never "" for a zone made by NewFailed.
	Failed string

	// source is a self-contained master file text that parses back into
	// this zone's records (see Source).
	source []byte
	// sourceSize and sourceSum are the length and the first half of the
	// SHA-256 of source, which Precompile lets go (see dropSource).
	sourceSize int
	sourceSum  [sha256.Size / 2]byte
	// stamp is the file's stamp when it was read (SetStamp), zero when
	// it had none.
	stamp FileStamp

	nodes nodeTable
	apex  *node
	// files are the master files records were read from (the zone's
	// own first), by rrset.file.
	files []string
	// prev is ParseOptions.Previous, and workers ParseOptions.Workers,
	// until Precompile has run.
	prev *Zone
	// negWire is the negative-answer SOA for the fast path.
	negWire NegativeSOA
	// base is the zone WithSerial made this one from (see Base).
	base *Zone
	// signer signs the zone's RRsets (nil: the zone is not signed).
	signer *dnssec.Signer
	// steerSigner signs the steered answers of a zone signed elsewhere
	// (multi-signer, see SignSteered); nil otherwise.
	steerSigner *dnssec.Signer
	// negSigs are the RRSIGs of NegSOA in a signed zone (see Sign).
	negSigs []dns.RR
	// pre is set on a zone signed elsewhere (see presigned.go): its
	// chain and signatures, checked at load.
	pre *presigned
	// chunks are the file's chunks (see chunks.go), nil when it is not
	// cut into chunks (small, or with $INCLUDE or $GENERATE).
	chunks *chunkIndex
	// gone lists, on an incremental zone, the names prev has and it does
	// not.
	gone []string

	// The small fields last, side by side: padded one by one between
	// the others they made the struct 472 bytes (a 480-byte block for
	// each of a hosting provider's 100,000 zones), together 416.

	// fileSerial is the SOA serial as read when WithSerial changed it.
	fileSerial uint32
	workers    int32
	// fromFile is set when source is the file's own bytes (no $INCLUDE):
	// a reload that reads the same bytes may keep this zone (Unchanged).
	fromFile bool
	// precompiled is set once Precompile has run: a zone kept across a
	// reload is published already and is never written again.
	precompiled bool
	// shares is set when RRsets may be shared with an earlier load of the
	// zone, whose lines they keep (see line).
	shares bool
	// incremental is set on a zone built from prev by parsing only the
	// chunks that changed (gone then lists the names prev has and it
	// does not), and Precompile packs again only the templates that may
	// hold a changed name's data.
	incremental bool
	// apexOnly is set on a zone WithSerial made from a published one:
	// Precompile packs its apex only (every other node is the base's,
	// packed already).
	apexOnly bool
}

// node holds the RRsets owned by one name. A node with no RRsets is an
// empty non-terminal: it exists, so its names answer NODATA, not NXDOMAIN.
type node struct {
	name   string
	rrsets []rrset // sorted by type
	// tpl and ntpl are the precompiled wire answers (see Precompile,
	// templates): a pointer and a count, 16 bytes fewer per node than a
	// slice. A node of more than 255 types is answered the general way.
	tpl *template
	// sig holds the node's signatures in a signed zone (see Zone.Sign),
	// nil in an unsigned one.
	sig *nodeSigs
	// chunk identifies the part of the master file (see chunks.go) that
	// holds the name's first record; a name with records in several
	// parts is in its zone's chunkIndex.spread too.
	chunk uint32
	// steerType is what MarkSteered made the name's steered records: A
	// (for A and AAAA) or CNAME; the NSEC of a denial lists them.
	steerType uint16
	ntpl      uint8
	cut       bool // NS below the apex: a delegation point
	// hasCNAME and hasDNAME say the node holds a CNAME or DNAME RRset.
	hasCNAME, hasDNAME bool
	// plain is set on names the fast path may answer: no delegation,
	// CNAME or DNAME here, every RRset precompiled.
	plain bool
	// wildChild is set when *.name exists.
	wildChild bool
	// steered is set on names whose address (or CNAME) records are
	// chosen per query by a Steering.
	steered bool
	// steerNoV4 and steerNoV6 say an A-type steered name has no pool
	// with addresses of that family (SteeredFamilies): its NSECs do not
	// claim the type.
	steerNoV4, steerNoV6 bool
	// below is set on names at or under a delegation point or a DNAME other
	// than the cut itself: data there is glue or occluded, never answered.
	occluded bool
}

type rrset struct {
	rtype uint16
	file  uint16 // Zone.files index of where the RRset's first record is
	line  int32
	// p, n and c are the records as a slice (list, setList) or the wire
	// the RRset is kept as (see store.go): 16 bytes where a slice and a
	// pointer took 32. Read the records with records.
	p    unsafe.Pointer
	n, c uint32
}

// get returns the node's records of type t, nil when it has none. An
// RRset kept in wire form is made into records anew on each call: the
// caller may keep them, but must not expect the same ones twice.
func (n *node) get(t uint16) []dns.RR {
	for i := range n.rrsets {
		if n.rrsets[i].rtype == t {
			return n.rrsets[i].records(n.name)
		}
	}
	return nil
}

// Load reads the master file file (from fsys, or the local disk when fsys is
// nil) as the zone origin, checks it and indexes it. Errors and warnings come
// back as diag.Problems; the zone is nil when there are errors.
func Load(fsys fs.FS, origin, file string) (z *Zone, errs, warns diag.Problems) {
	data, err := readFile(fsys, file)
	if err != nil {
		errs.Add(file, 0, "%v", err)
		return nil, errs, nil
	}
	return Parse(fsys, origin, file, data)
}

var parseErrRe = regexp.MustCompile(`^(?:(.*): )?dns: (.*) at line: (\d+):(\d+)$`)

// NewFailed returns the stand-in for a zone that could not be loaded: it
// holds no data, and lookups answer SERVFAIL for every name in it (rather
// than REFUSED, or the answer of a parent zone that is served). reason is
// why it failed, for status and logs.
func NewFailed(origin, file, reason string) *Zone {
	if reason == "" {
		reason = "failed to load"
	}
	return &Zone{Origin: dns.CanonicalName(origin), File: file, Failed: reason}
}

// Source returns a self-contained master file text that parses (with
// Parse, for the same origin) back into this zone's records: until
// Precompile, the file as read when it has no $INCLUDE; after it, or with
// $INCLUDE, the loaded records written out one per line (made anew on
// each call). It is what a last good copy of the zone is kept as. It is
// nil for a failed zone, and must not be modified.
func (z *Zone) Source() []byte {
	if z.source == nil && z.Failed == "" && z.nodes.len() > 0 && z.sourceSize > 0 {
		return z.flatten()
	}
	return z.source
}

// dropSource lets the zone's text go once it is precompiled, keeping its
// length and digest to know the same bytes again (Unchanged). What reads
// the text after that is rare (a fallback to the previous load's copy,
// which writes the records out again), while keeping it cost every zone
// the size of its file: about 500 bytes of a small zone's 4,300, for a
// hosting provider's 100,000 zones 50 MB (the last good copies are taken
// before Precompile, see snapshot.Copies). A 1 M-record zone's text was
// a tenth of all it holds.
func (z *Zone) dropSource() {
	if z.source == nil {
		return
	}
	if z.fromFile {
		sum := sha256.Sum256(z.source)
		z.sourceSum = [sha256.Size / 2]byte(sum[:sha256.Size/2])
	}
	z.source = nil
}

// ReadFile reads a zone file as Load does.
func ReadFile(fsys fs.FS, file string) ([]byte, error) { return readFile(fsys, file) }

// Unchanged reports whether z was loaded from file and data is its very
// bytes, so that a reload may keep z instead of parsing data again. A zone
// with $INCLUDE is never unchanged: its included files may differ.
func (z *Zone) Unchanged(file string, data []byte) bool {
	if z == nil || z.Failed != "" || !z.fromFile || z.File != file {
		return false
	}
	if z.source != nil {
		return bytes.Equal(z.source, data)
	}
	sum := sha256.Sum256(data)
	return len(data) == z.sourceSize && [sha256.Size / 2]byte(sum[:sha256.Size/2]) == z.sourceSum
}

// Parse is Load with the file's contents already read. The zone keeps
// data (see Source): the caller must not modify it afterwards.
func Parse(fsys fs.FS, origin, file string, data []byte) (z *Zone, errs, warns diag.Problems) {
	return ParseWith(fsys, origin, file, data, ParseOptions{})
}

// hasInclude reports whether data may hold an $INCLUDE directive (a
// mention in a comment or a string counts too, which only costs a
// flattened Source).
func hasInclude(data []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '$')
		if j < 0 {
			return false
		}
		i += j + 1
		if len(data)-i >= 7 && bytes.EqualFold(data[i:i+7], []byte("INCLUDE")) {
			return true
		}
	}
}

// flatten writes the zone's records as a master file with absolute names,
// one record per line, names in canonical order and RRsets by type.
func (z *Zone) flatten() []byte {
	names := make([]string, 0, z.nodes.len())
	for name, n := range z.nodes.all {
		if len(n.rrsets) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names) // any fixed order; canonical order costs a split per comparison
	var b bytes.Buffer
	fmt.Fprintf(&b, "; zone %s as loaded from %s, written out by steer\n", z.Origin, z.File)
	for _, name := range names {
		for _, s := range z.nodes.get(name).rrsets {
			if name == z.Origin && z.signer != nil && z.pre == nil && signerApex(s.rtype) {
				continue // the signer's, not the file's
			}
			for _, rr := range s.records(name) {
				b.WriteString(rr.String())
				b.WriteByte('\n')
			}
		}
	}
	if z.pre != nil {
		for _, rr := range z.pre.records {
			b.WriteString(rr.String())
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// MarkSteered makes name (canonical, inside the zone) a steered name: its
// records of type rtype (A, which covers A and AAAA, or CNAME) come from a
// Steering at query time. It must be called before the zone is published,
// and fails when the zone's own data at name would conflict (but for a
// zone signed elsewhere, whose records there stand in for the steered
// ones: see SignSteered).
func (z *Zone) MarkSteered(name string, rtype uint16) error {
	if z.Failed != "" {
		return fmt.Errorf("zone %s failed to load (%s)", z.Origin, z.Failed)
	}
	if !isSubDomain(z.Origin, name) {
		return fmt.Errorf("%s is not in zone %s", name, z.Origin)
	}
	for p := parent(name, z.Origin); p != ""; p = parent(p, z.Origin) {
		if pn := z.nodes.get(p); pn != nil && (pn.cut || pn.hasDNAME) {
			return fmt.Errorf("%s is below the delegation or DNAME at %s, so it cannot be answered", name, p)
		}
	}
	if n := z.nodes.get(name); n != nil {
		if n.cut {
			return fmt.Errorf("%s is a delegation point in %s", name, z.File)
		}
		for _, s := range n.rrsets {
			conflict := s.rtype == dns.TypeCNAME || s.rtype == dns.TypeDNAME
			switch rtype {
			case dns.TypeCNAME:
				conflict = true // a CNAME stands alone
			default:
				conflict = conflict || s.rtype == dns.TypeA || s.rtype == dns.TypeAAAA
			}
			if conflict && !z.standIn(s.rtype, rtype) {
				return fmt.Errorf("%s already has %s records at %s:%d; a steered name's records come from its pools", name, dns.TypeToString[s.rtype], z.files[s.file], z.line(name, &s))
			}
		}
	}
	n := z.ensure(name)
	if z.borrowed(n) {
		n = z.own(n)
	}
	n.steered = true
	n.steerType = rtype
	n.steerNoV4, n.steerNoV6 = false, false
	return nil
}

// SteeredFamilies says which address families the A-type steered name
// (marked by MarkSteered) has records of, as configured: the NSEC of a
// denial at the name lists A only with v4 and AAAA only with v6. Without
// it, both are listed. It must be called before the zone is published.
func (z *Zone) SteeredFamilies(name string, v4, v6 bool) {
	n := z.nodes.get(name)
	if n == nil || !n.steered || n.steerType != dns.TypeA {
		return
	}
	if z.borrowed(n) {
		n = z.own(n)
	}
	n.steerNoV4, n.steerNoV6 = !v4, !v6
}

// borrowed reports whether n is the served zone's node, shared by this
// zone until Precompile (see ParseOptions.Previous): it must not be
// written.
func (z *Zone) borrowed(n *node) bool {
	return z.prev != nil && z.prev.nodes.get(n.name) == n
}

// own replaces the borrowed node n by a copy of this zone's own.
func (z *Zone) own(n *node) *node {
	c := *n
	c.setTemplates(nil)
	if c.sig != nil {
		s := *c.sig
		s.templates = nil // packed again with the node's
		c.sig = &s
	}
	z.nodes.put(&c)
	if z.apex == n {
		z.apex = &c
	}
	return &c
}

// line returns where the RRset s of name starts in the zone's file: its
// own record of it, or, when the RRset may be shared with an earlier load
// (whose lines it keeps), the line found by reading the file again. Only
// messages need it.
func (z *Zone) line(name string, s *rrset) int {
	if !z.shares {
		return int(s.line)
	}
	if z.source == nil {
		return int(s.line)
	}
	text := svcbKeys(z.source) // as ParseWith read it
	zp := dns.NewZoneParser(bytes.NewReader(text), z.Origin, z.File)
	i := 0
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if h := rr.Header(); h.Rrtype == s.rtype && dns.CanonicalName(h.Name) == name {
			if p := recordPositions(nil, z.File, text, 0, i+1); len(p) == i+1 {
				return p[i].Line
			}
			break
		}
		i++
	}
	return int(s.line)
}

// ensure returns the node for name, creating it and every missing ancestor up
// to the origin as empty non-terminals.
func (z *Zone) ensure(name string) *node {
	if n := z.nodes.get(name); n != nil {
		return n
	}
	n := &node{name: name}
	z.nodes.put(n)
	if p := parent(name, z.Origin); p != "" {
		z.ensure(p)
	}
	return n
}

// isSubDomain is dns.IsSubDomain(parent, child) without its allocations
// when child ends in parent's bytes after a label boundary (an unescaped
// dot): each record of every zone is checked at load (100,000 zones, a
// million records: 70 MB of label offsets and a quarter of a CPU-s). Any
// other case, escapes, case and "." included, is dns.IsSubDomain's.
func isSubDomain(parent, child string) bool {
	if child == parent {
		return true
	}
	if d := len(child) - len(parent) - 1; d > 0 && child[d] == '.' && child[d+1:] == parent {
		bs := 0
		for i := d - 1; i >= 0 && child[i] == '\\'; i-- {
			bs++
		}
		if bs%2 == 0 {
			return true
		}
	}
	return dns.IsSubDomain(parent, child)
}

// parent returns the name one label up from name, or "" at or above origin.
func parent(name, origin string) string {
	if name == origin || len(name) <= len(origin) {
		return ""
	}
	off, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[off:]
}

// Serial returns the zone's SOA serial (0 for a failed zone).
func (z *Zone) Serial() uint32 {
	if z.SOA == nil {
		return 0
	}
	return z.SOA.Serial
}

// String describes the zone for logs.
func (z *Zone) String() string {
	if z.Failed != "" {
		return fmt.Sprintf("%s (failed: %s; answered SERVFAIL, from %s)", z.Origin, z.Failed, z.File)
	}
	return fmt.Sprintf("%s (serial %d, %d records, from %s)", z.Origin, z.SOA.Serial, z.Records, z.File)
}

// FileStamp identifies one version of a file on the local disk: its
// device and inode, size, and modification and change times. The change
// time moves with every write, rename onto it or attribute change, and
// cannot be set back, so a file whose stamp is the same has not been
// written since (see StampFile for the one exception).
type FileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// racyWindow is how recently before it was stamped a file may have
// changed for its stamp not to be trusted: a write within the same tick
// of the file system's clock as the read would leave the times as they
// were (git's "racily clean" entries).
const racyWindow = 2 * time.Second

// StampFile stats file on the local disk (fsys nil) before it is read;
// ok is false when it cannot be stamped (an fs.FS, an error) or it
// changed within racyWindow of now, and it must be read and compared.
func StampFile(fsys fs.FS, file string, now time.Time) (st FileStamp, ok bool) {
	if fsys != nil {
		return st, false
	}
	fi, err := os.Stat(file)
	if err != nil {
		return st, false
	}
	return stampOf(fi, now)
}

// StampAndReadFile is StampFile followed by ReadFile, with one open: the
// stamp is taken from the open file before it is read (fstat), and the
// read is sized by it. A start reads 100,000 small zone files so, where
// a stat of the path, then an open, a stat and reads took a second path
// look-up and stat each. (On Linux the file is read with system calls of
// its own and O_NOATIME: read_linux.go.)
func StampAndReadFile(fsys fs.FS, file string, now time.Time) (st FileStamp, ok bool, data []byte, err error) {
	if fsys != nil {
		data, err = fs.ReadFile(fsys, file)
		return st, false, data, err
	}
	return stampAndReadFile(file, now)
}

// stampOf is the stamp of the file fi describes, and whether it may be
// trusted (StampFile).
func stampOf(fi fs.FileInfo, now time.Time) (st FileStamp, ok bool) {
	if !fi.Mode().IsRegular() {
		return st, false
	}
	st, ok = statStamp(fi) // stamp_*.go: the stat's fields differ by system
	return st, ok && trusted(st, now)
}

// trusted reports whether the stamp st, taken at now, may be trusted:
// the file did not change within racyWindow before.
func trusted(st FileStamp, now time.Time) bool {
	return now.UnixNano()-max(st.mtime, st.ctime) >= int64(racyWindow)
}

// Stamp returns the stamp of the file z was read from, as StampFile gave
// it just before the read (SetStamp); ok is false when it has none.
func (z *Zone) Stamp() (FileStamp, bool) {
	return z.stamp, z.stamp != FileStamp{}
}

// SetStamp records the stamp of z's file taken before it was read; a
// zone not yet published only.
func (z *Zone) SetStamp(st FileStamp) { z.stamp = st }
