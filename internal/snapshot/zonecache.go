package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/zone"
)

// CacheFile returns the name of the file, in a cache directory, that holds
// the last good copy of the zone origin (see zone.CacheFile).
func CacheFile(origin string) string { return zone.CacheFile(origin) }

// loadCopy reads the cached copy of origin in dir: its file of its own
// (CacheFile) or its copy in the pack (copypack.go), whichever is newer;
// src is nil when there is none. path names the file, or the pack and the
// copy's name in it ("…/copies.pack#example.com.zone").
func loadCopy(dir, origin string) (path string, src []byte, err error) {
	name := CacheFile(origin)
	path = filepath.Join(dir, name)
	// Twice: a pack written meanwhile takes the file in and removes it.
	for range 2 {
		st, serr := os.Stat(path)
		if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			return path, nil, serr
		}
		var p *copyPack
		p, err = openPack(filepath.Join(dir, packName))
		if err == nil && p != nil {
			var e packEntry
			var ok bool
			e, ok, err = p.find(name)
			if err == nil && ok && (serr != nil || !st.ModTime().After(p.mtime)) {
				src, err = p.read(e)
				p.close()
				return p.path + "#" + name, src, err
			}
			p.close()
		}
		if serr != nil {
			break
		}
		src, rerr := os.ReadFile(path)
		if rerr == nil || !errors.Is(rerr, fs.ErrNotExist) {
			return path, src, rerr
		}
	}
	// None (or only a damaged pack: err says so).
	return path, nil, err
}

// zoneCopy is the source (zone.Source) of the zone origin, taken before
// Precompile lets a large zone's go.
type zoneCopy struct {
	origin string
	src    []byte
}

// Copies are the last good copies of a build's zones, for the cache
// directory; Keep writes them.
type Copies struct {
	dir   string
	mu    sync.Mutex
	items []zoneCopy // nil once kept
}

// Len is the number of copies not kept yet.
func (c *Copies) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Keep writes each copy that differs from the one in the directory, the
// first time it is called; the problems name the copies that could not be
// kept.
func (c *Copies) Keep() diag.Problems {
	c.mu.Lock()
	defer c.mu.Unlock()
	items := c.items
	c.items = nil
	var warns diag.Problems
	for _, f := range saveCopies(c.dir, items) {
		warns.Add(f.path, 0, "%s", f.msg)
	}
	return warns
}

// cacheFailure is a copy that could not be kept, and why.
type cacheFailure struct {
	path, msg string
}

func zoneFailure(path, origin string, err error) cacheFailure {
	return cacheFailure{path, fmt.Sprintf("cannot keep the last good copy of zone %s: %v", origin, err)}
}

// saveCopies writes each copy that differs from the one kept in dir:
// many (packMin, and a sixteenth of the pack) as a new pack of every
// zone's copy (copypack.go), fewer as files of their own, which are
// newer than the pack and override its copies. Either is atomic: a crash
// leaves the old copy or the new one, never half of one.
func saveCopies(dir string, items []zoneCopy) []cacheFailure {
	var fails []cacheFailure
	own, err := ownFiles(dir)
	if err != nil {
		return append(fails, cacheFailure{dir, fmt.Sprintf("cannot keep the last good copies of %d zones: %v", len(items), err)})
	}
	packPath := filepath.Join(dir, packName)
	pack, err := openPack(packPath)
	if err == nil && pack != nil && len(items) > 64 {
		err = pack.load() // many look-ups: the index in memory, checked
	}
	if err != nil {
		// Damaged: every copy is written anew (a new pack replaces it).
		fails = append(fails, cacheFailure{packPath, fmt.Sprintf("the last good copies kept are not read: %v", err)})
		pack.close()
		pack = nil
	}
	defer pack.close()
	var win *packWindow
	var packTime time.Time
	packCount := 0
	if pack != nil {
		win, packTime, packCount = &packWindow{f: pack.f}, pack.mtime, pack.count
	}
	// ownNewer: the file of its own named name holds a newer copy than
	// the pack (which has one too).
	ownNewer := func(path string) bool {
		st, err := os.Stat(path)
		return err == nil && st.ModTime().After(packTime)
	}
	var diff []int32 // indices of items
	var buf []byte
	names := make([]string, len(items))
	for i, it := range items {
		if it.src == nil {
			continue
		}
		name := CacheFile(it.origin)
		names[i] = name
		var e packEntry
		inPack := false
		if pack != nil {
			e, inPack, _ = pack.find(name) // an error is a copy not found: written again
		}
		same := false
		switch {
		case own[name] && (!inPack || ownNewer(filepath.Join(dir, name))):
			same, buf = sameFile(filepath.Join(dir, name), it.src, buf)
		case inPack:
			same = win.equal(e, it.src)
		}
		if !same {
			diff = append(diff, int32(i))
		}
	}
	// Many files of their own (an earlier version's, or many reloads')
	// go into a pack even when no copy changed: a restart reads one file.
	n := len(diff) + len(own)
	packed := n >= packMin && n*16 >= packCount
	if len(diff) == 0 && (!packed || len(own) < packMin) {
		return fails
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return append(fails, cacheFailure{dir, fmt.Sprintf("cannot keep the last good copies of %d zones: %v", len(diff), err)})
	}
	if packed {
		// A new pack of every copy: items', then those of zones not
		// among them, from their own files or the old pack; the files of
		// their own it takes in are removed once it is in place.
		var newest time.Time
		newer := make(map[string]bool, len(own))
		for name := range own {
			st, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			newest = later(newest, st.ModTime())
			newer[name] = st.ModTime().After(packTime)
		}
		all := make([]packItem, 0, len(items)+len(own))
		for i, it := range items {
			if it.src != nil {
				all = append(all, packItem{name: names[i], data: it.src})
			}
		}
		slices.Sort(names)
		among := func(name []byte) bool {
			_, ok := slices.BinarySearchFunc(names, name, func(s string, b []byte) int { return -compareName(b, s) })
			return ok
		}
		for name := range own {
			if among([]byte(name)) {
				continue
			}
			if pack != nil && !newer[name] {
				if e, ok, _ := pack.find(name); ok {
					all = append(all, packItem{name: name, e: &e})
					continue
				}
			}
			all = append(all, packItem{name: name, path: filepath.Join(dir, name)})
		}
		for i := range packCount {
			e, n, err := pack.record(i)
			if err != nil {
				break
			}
			if !own[string(n)] && !among(n) {
				all = append(all, packItem{name: string(n), e: &e})
			}
		}
		skipped, err := writePack(dir, all, win, later(newest, packTime))
		if err != nil {
			return append(fails, cacheFailure{packPath, fmt.Sprintf("cannot keep the last good copies of %d zones: %v", len(all), err)})
		}
		syncDir(dir) // the rename itself survives a crash
		for name, err := range skipped {
			fails = append(fails, cacheFailure{filepath.Join(dir, name), fmt.Sprintf("last good copy %s not taken into %s: %v", name, packName, err)})
		}
		for name := range own {
			if _, ok := skipped[name]; !ok {
				// Left by a crash, it is older than the pack and loses to it.
				os.Remove(filepath.Join(dir, name))
			}
		}
		return fails
	}
	type pending struct {
		tmp, path, origin string
	}
	var todo []pending
	for _, i := range diff {
		it := items[i]
		path := filepath.Join(dir, names[i])
		tmp, err := writeTemp(dir, it.src, packTime)
		if err != nil {
			fails = append(fails, zoneFailure(path, it.origin, err))
			continue
		}
		todo = append(todo, pending{tmp, path, it.origin})
	}
	if len(todo) == 0 {
		return fails
	}
	d, err := os.Open(dir)
	if err == nil {
		if err = syncData(d, todo[0].tmp, len(todo)); err != nil {
			// No file system sync: each file on its own.
			err = nil
			for _, p := range todo {
				err = errors.Join(err, syncFile(p.tmp))
			}
		}
	}
	for _, p := range todo {
		if err == nil {
			rerr := os.Rename(p.tmp, p.path)
			if rerr == nil {
				continue
			}
			fails = append(fails, zoneFailure(p.path, p.origin, rerr))
		} else {
			fails = append(fails, zoneFailure(p.path, p.origin, err))
		}
		os.Remove(p.tmp)
	}
	if d != nil {
		d.Sync() // the renames themselves survive a crash
		d.Close()
	}
	return fails
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ownFiles lists the copies in files of their own in dir (CacheFile
// names); none when dir does not exist.
func ownFiles(dir string) (map[string]bool, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var own map[string]bool
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if strings.HasSuffix(n, ".zone") && !strings.HasPrefix(n, ".tmp-") {
				if own == nil {
					own = make(map[string]bool)
				}
				own[n] = true
			}
		}
		if err == io.EOF {
			return own, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// syncData makes the n temporary files just written in the directory d
// durable: the file (when one) or the whole file system (when more).
func syncData(d *os.File, one string, n int) error {
	if n == 1 {
		return syncFile(one)
	}
	return syncFS(d) // syncfs_*.go
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// writeTemp writes src to a new temporary file in dir, not synced, with
// a modification time later than after (the pack's, which it overrides).
func writeTemp(dir string, src []byte, after time.Time) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*.zone")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	if _, err = f.Write(src); err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = newerThan(f, tmp, after)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// sameFile reports whether the file at path holds exactly data, read a
// block at a time into buf (grown up to 64 KiB, and returned for the next
// call): a large zone's copy is not read into memory whole beside the
// zone's own text, nor is a block allocated for each of many small ones.
func sameFile(path string, data, buf []byte) (bool, []byte) {
	f, err := os.Open(path)
	if err != nil {
		return false, buf
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != int64(len(data)) {
		return false, buf
	}
	if want := min(64<<10, len(data)); cap(buf) < want {
		buf = make([]byte, want)
	}
	buf = buf[:cap(buf)]
	for off := 0; off < len(data); {
		n, err := io.ReadFull(f, buf[:min(len(buf), len(data)-off)])
		if !bytes.Equal(buf[:n], data[off:off+n]) {
			return false, buf
		}
		off += n
		if err != nil {
			return off == len(data), buf
		}
	}
	return true, buf
}
