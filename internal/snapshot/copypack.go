package snapshot

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The pack of last good copies: many zones' copies in one file of the
// cache directory, written in one go, where one file a zone would cost
// 100,000 creates, renames and (on a first start) 100,000 files' worth
// of the node's heap in the garbage of their writing (about 1.2 KB a
// file, and 15 s of kernel time on an ext4 VM). A copy in a file of its
// own (CacheFile) overrides the pack's when it is newer than the pack:
// a reload that parsed a few zones writes theirs as files, and the next
// pack takes them in and removes them.
//
// Layout (integers little-endian):
//
//	"steer-copies-v1\n"              16 bytes
//	the copies' bytes, back to back
//	index: one 32-byte record a copy, sorted by name:
//	  offset u64, length u64, CRC-32C of the copy u32, name offset u32, name length u32, 0 u32
//	names: the CacheFile names, back to back
//	trailer: index offset u64, count u32, names length u32,
//	  CRC-32C of index and names u32, 0 u32, "steer-cp"
//
// A pack is written to a temporary file, synced and renamed over the old
// one: a crash leaves the old pack or the new, never half of one.
const (
	packName    = "copies.pack"
	packMagic   = "steer-copies-v1\n"
	packEnd     = "steer-cp"
	packRecord  = 32
	packTrailer = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packMin is the fewest changed copies written as a new pack rather than
// as files of their own (a variable for tests).
var packMin = 256

// copyPack is an open pack.
type copyPack struct {
	f        *os.File
	path     string
	mtime    time.Time
	count    int
	indexOff int64
	namesLen int64
	// index holds the index records and names when loaded (load); nil:
	// they are read from the file where a look-up needs them.
	index   []byte
	scratch []byte
}

// packEntry is where a copy is in a pack.
type packEntry struct {
	off int64
	n   int64
	crc uint32
}

// openPack opens the pack at path; nil, nil when there is none.
func openPack(path string) (*copyPack, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := readTrailer(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

func readTrailer(f *os.File, path string) (*copyPack, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	damaged := func(why string) error { return fmt.Errorf("%s: not a pack of copies (%s)", path, why) }
	if size < int64(len(packMagic))+packTrailer {
		return nil, damaged("too short")
	}
	var head [len(packMagic)]byte
	var tr [packTrailer]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(tr[:], size-packTrailer); err != nil {
		return nil, err
	}
	if string(head[:]) != packMagic || string(tr[24:]) != packEnd {
		return nil, damaged("no header or trailer: written only in part")
	}
	p := &copyPack{
		f:        f,
		path:     path,
		mtime:    st.ModTime(),
		indexOff: int64(binary.LittleEndian.Uint64(tr[0:])),
		count:    int(binary.LittleEndian.Uint32(tr[8:])),
		namesLen: int64(binary.LittleEndian.Uint32(tr[12:])),
	}
	if p.indexOff < int64(len(packMagic)) || p.indexOff+int64(p.count)*packRecord+p.namesLen+packTrailer != size {
		return nil, damaged("its index does not fit the file")
	}
	return p, nil
}

func (p *copyPack) close() {
	if p != nil {
		p.f.Close()
	}
}

// load reads the index and the names into memory and checks them
// against their checksum: for the many look-ups of a Keep.
func (p *copyPack) load() error {
	b := make([]byte, int64(p.count)*packRecord+p.namesLen)
	if _, err := p.f.ReadAt(b, p.indexOff); err != nil {
		return err
	}
	var tr [packTrailer]byte
	if _, err := p.f.ReadAt(tr[:], p.indexOff+int64(len(b))); err != nil {
		return err
	}
	if crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(tr[16:]) {
		return fmt.Errorf("%s: not a pack of copies (its index is damaged)", p.path)
	}
	p.index = b
	return nil
}

// record returns the i-th index record and its name (valid until the
// next call).
func (p *copyPack) record(i int) (packEntry, []byte, error) {
	var r []byte
	if p.index != nil {
		r = p.index[i*packRecord : (i+1)*packRecord]
	} else {
		if cap(p.scratch) < packRecord {
			p.scratch = make([]byte, 256)
		}
		r = p.scratch[:packRecord]
		if _, err := p.f.ReadAt(r, p.indexOff+int64(i)*packRecord); err != nil {
			return packEntry{}, nil, err
		}
	}
	e := packEntry{
		off: int64(binary.LittleEndian.Uint64(r[0:])),
		n:   int64(binary.LittleEndian.Uint64(r[8:])),
		crc: binary.LittleEndian.Uint32(r[16:]),
	}
	noff, nlen := int64(binary.LittleEndian.Uint32(r[20:])), int64(binary.LittleEndian.Uint32(r[24:]))
	if noff+nlen > p.namesLen || e.off < int64(len(packMagic)) || e.n < 0 || e.off > p.indexOff-e.n {
		return packEntry{}, nil, fmt.Errorf("%s: not a pack of copies (index record %d out of range)", p.path, i)
	}
	if p.index != nil {
		base := int64(p.count) * packRecord
		return e, p.index[base+noff : base+noff+nlen], nil
	}
	if int64(cap(p.scratch)) < nlen {
		p.scratch = make([]byte, nlen)
	}
	name := p.scratch[:nlen]
	if _, err := p.f.ReadAt(name, p.indexOff+int64(p.count)*packRecord+noff); err != nil {
		return packEntry{}, nil, err
	}
	return e, name, nil
}

// find looks the copy named name (CacheFile) up.
func (p *copyPack) find(name string) (packEntry, bool, error) {
	lo, hi := 0, p.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e, n, err := p.record(m)
		if err != nil {
			return packEntry{}, false, err
		}
		switch c := compareName(n, name); {
		case c == 0:
			return e, true, nil
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return packEntry{}, false, nil
}

// compareName is strings.Compare(string(b), s) without the string.
func compareName(b []byte, s string) int {
	for i := 0; i < len(b) && i < len(s); i++ {
		if b[i] != s[i] {
			if b[i] < s[i] {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(len(b), len(s))
}

// read returns the copy e, checked against its checksum.
func (p *copyPack) read(e packEntry) ([]byte, error) {
	b := make([]byte, e.n)
	if _, err := p.f.ReadAt(b, e.off); err != nil {
		return nil, err
	}
	if crc32.Checksum(b, castagnoli) != e.crc {
		return nil, fmt.Errorf("%s: its copy at offset %d is damaged", p.path, e.off)
	}
	return b, nil
}

// packWindow reads a pack's copies through one buffer: copies read in
// the order they were written cost a read of the file a buffer full.
type packWindow struct {
	f   *os.File
	buf []byte
	off int64 // of buf[0] in the file
	n   int   // valid bytes in buf
}

// each calls fn with the bytes [off, off+n) of the file, in order, a
// buffer full at most at a time; it stops at fn's first error.
func (w *packWindow) each(off, n int64, fn func([]byte) error) error {
	if w.buf == nil {
		w.buf = make([]byte, 256<<10)
	}
	for n > 0 {
		if off < w.off || off >= w.off+int64(w.n) {
			// A buffer full when reading on (copies in the order
			// written); else what is asked, to a page: a reload's few
			// look-ups read no more than their copies.
			read := w.buf
			if end := w.off + int64(w.n); w.n == 0 || off < end || off > end+4096 {
				read = w.buf[:min(int64(len(w.buf)), max(n, 4096))]
			}
			m, err := w.f.ReadAt(read, off)
			if m == 0 {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			w.off, w.n = off, m
		}
		b := w.buf[off-w.off : w.n]
		if int64(len(b)) > n {
			b = b[:n]
		}
		if err := fn(b); err != nil {
			return err
		}
		off += int64(len(b))
		n -= int64(len(b))
	}
	return nil
}

var errDiffers = errors.New("differs")

// equal reports whether the copy e holds exactly data.
func (w *packWindow) equal(e packEntry, data []byte) bool {
	if e.n != int64(len(data)) {
		return false
	}
	at := 0
	return w.each(e.off, e.n, func(b []byte) error {
		if !bytes.Equal(b, data[at:at+len(b)]) {
			return errDiffers
		}
		at += len(b)
		return nil
	}) == nil
}

// packItem is one copy of a new pack: data, or the copy e of the old
// pack, or the file path.
type packItem struct {
	name string
	data []byte
	e    *packEntry
	path string
}

// writePack writes items as the pack of dir, through a temporary file
// synced before it is renamed over the old pack (old reads its copies
// taken from there). The pack's modification time is made later than
// after: the files of their own it takes in must be older than it.
// skipped are the items that could not be read (left out): a file of
// its own, or a damaged copy of the old pack.
func writePack(dir string, items []packItem, old *packWindow, after time.Time) (skipped map[string]error, err error) {
	f, err := os.CreateTemp(dir, ".tmp-*.pack")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	type rec struct {
		name   string
		off, n int64
		crc    uint32
	}
	recs := make([]rec, 0, len(items))
	bw := bufio.NewWriterSize(f, 256<<10)
	bw.WriteString(packMagic)
	off := int64(len(packMagic))
	for _, it := range items {
		crc := uint32(0)
		var n int64
		switch {
		case it.e != nil:
			err = old.each(it.e.off, it.e.n, func(b []byte) error {
				crc = crc32.Update(crc, castagnoli, b)
				n += int64(len(b))
				_, err := bw.Write(b)
				return err
			})
			if err == nil && crc != it.e.crc {
				// Left out (its bytes stay, indexed by nothing): one
				// damaged copy must not keep every other from a pack.
				if skipped == nil {
					skipped = make(map[string]error)
				}
				skipped[it.name] = fmt.Errorf("its copy in the old pack is damaged (checksum)")
				off += n
				continue
			}
		case it.path != "":
			data, rerr := os.ReadFile(it.path)
			if rerr != nil {
				if skipped == nil {
					skipped = make(map[string]error)
				}
				skipped[it.name] = rerr
				continue
			}
			crc = crc32.Checksum(data, castagnoli)
			n = int64(len(data))
			_, err = bw.Write(data)
		default:
			crc = crc32.Checksum(it.data, castagnoli)
			n = int64(len(it.data))
			_, err = bw.Write(it.data)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.name, err)
		}
		recs = append(recs, rec{it.name, off, n, crc})
		off += n
	}
	slices.SortStableFunc(recs, func(a, b rec) int { return strings.Compare(a.name, b.name) })
	recs = slices.CompactFunc(recs, func(a, b rec) bool { return a.name == b.name })
	indexOff := off
	sum := crc32.New(castagnoli)
	iw := io.MultiWriter(bw, sum)
	var r [packRecord]byte
	nameOff := uint32(0)
	for _, x := range recs {
		binary.LittleEndian.PutUint64(r[0:], uint64(x.off))
		binary.LittleEndian.PutUint64(r[8:], uint64(x.n))
		binary.LittleEndian.PutUint32(r[16:], x.crc)
		binary.LittleEndian.PutUint32(r[20:], nameOff)
		binary.LittleEndian.PutUint32(r[24:], uint32(len(x.name)))
		iw.Write(r[:])
		nameOff += uint32(len(x.name))
	}
	for _, x := range recs {
		io.WriteString(iw, x.name)
	}
	var tr [packTrailer]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(indexOff))
	binary.LittleEndian.PutUint32(tr[8:], uint32(len(recs)))
	binary.LittleEndian.PutUint32(tr[12:], nameOff)
	binary.LittleEndian.PutUint32(tr[16:], sum.Sum32())
	copy(tr[24:], packEnd)
	bw.Write(tr[:])
	if err = bw.Flush(); err != nil {
		return nil, err
	}
	if err = f.Chmod(0o644); err != nil {
		return nil, err
	}
	if err = newerThan(f, tmp, after); err != nil {
		return nil, err
	}
	if err = f.Sync(); err != nil {
		return nil, err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return nil, err
	}
	return skipped, os.Rename(tmp, filepath.Join(dir, packName))
}

// newerThan makes the modification time of the file f (at path) later
// than t when it is not already: which of a pack and a file of its own
// holds a zone's newer copy is told by their times, and a clock's coarse
// tick (or a step back) must not make a later file look older.
func newerThan(f *os.File, path string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.ModTime().After(t) {
		return nil
	}
	m := t.Add(time.Microsecond)
	return os.Chtimes(path, m, m)
}
