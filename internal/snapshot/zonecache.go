package snapshot

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/zone"
	"golang.org/x/sys/unix"
)

// CacheFile returns the name of the file, in a cache directory, that holds
// the last good copy of the zone origin (see zone.CacheFile).
func CacheFile(origin string) string { return zone.CacheFile(origin) }

// loadCopy reads the cached copy of origin in dir; src is nil when there
// is none.
func loadCopy(dir, origin string) (path string, src []byte, err error) {
	path = filepath.Join(dir, CacheFile(origin))
	src, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, nil
	}
	return path, src, err
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

// Keep writes each copy that differs from the one in the directory, the
// first time it is called; the problems name the copy that could not be
// kept.
func (c *Copies) Keep() diag.Problems {
	c.mu.Lock()
	defer c.mu.Unlock()
	items := c.items
	c.items = nil
	var warns diag.Problems
	for _, f := range saveCopies(c.dir, items) {
		warns.Add(f.path, 0, "cannot keep the last good copy of zone %s: %v", f.origin, f.err)
	}
	return warns
}

// cacheFailure is a zone whose copy could not be kept, and why.
type cacheFailure struct {
	path, origin string
	err          error
}

// saveCopies writes each copy to its cache file in dir where it differs
// from what is there, atomically: a crash leaves the old copy or the new
// one, never half of one. The copies are written to temporary files
// first, made durable together (one sync of the file system rather than
// one per file: a start with 100,000 zones would otherwise wait for
// 200,000 syncs), then renamed, and the directory synced once.
func saveCopies(dir string, items []zoneCopy) []cacheFailure {
	type pending struct {
		tmp, path, origin string
	}
	var todo []pending
	var fails []cacheFailure
	made := false
	var buf []byte
	for _, it := range items {
		path := filepath.Join(dir, CacheFile(it.origin))
		if it.src == nil {
			continue
		}
		var same bool
		if same, buf = sameFile(path, it.src, buf); same {
			continue
		}
		if !made {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return append(fails, cacheFailure{path, it.origin, err})
			}
			made = true
		}
		tmp, err := writeTemp(dir, it.src)
		if err != nil {
			fails = append(fails, cacheFailure{path, it.origin, err})
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
			fails = append(fails, cacheFailure{p.path, p.origin, rerr})
		} else {
			fails = append(fails, cacheFailure{p.path, p.origin, err})
		}
		os.Remove(p.tmp)
	}
	if d != nil {
		d.Sync() // the renames themselves survive a crash
		d.Close()
	}
	return fails
}

// syncData makes the n temporary files just written in the directory d
// durable: the file (when one) or the whole file system (when more).
func syncData(d *os.File, one string, n int) error {
	if n == 1 {
		return syncFile(one)
	}
	return unix.Syncfs(int(d.Fd()))
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// writeTemp writes src to a new temporary file in dir, not synced.
func writeTemp(dir string, src []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*.zone")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	if _, err = f.Write(src); err == nil {
		err = f.Chmod(0o644)
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
