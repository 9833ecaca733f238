package snapshot

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/steer-dns/steer/internal/zone"
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

// saveCopy writes src, the source of zone origin (zone.Source), to its
// cache file in dir when it differs from what is there, atomically: a
// crash leaves the old copy or the new one, never half of one.
func saveCopy(dir, origin string, src []byte) (path string, err error) {
	path = filepath.Join(dir, CacheFile(origin))
	if src == nil {
		return path, nil
	}
	if sameFile(path, src) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return path, err
	}
	f, err := os.CreateTemp(dir, ".tmp-*.zone")
	if err != nil {
		return path, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(src); err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return path, err
	}
	if err = os.Rename(tmp, path); err != nil {
		return path, err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself survives a crash
		d.Close()
	}
	return path, nil
}

// sameFile reports whether the file at path holds exactly data, read a
// block at a time: a large zone's copy is not read into memory whole
// beside the zone's own text.
func sameFile(path string, data []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != int64(len(data)) {
		return false
	}
	buf := make([]byte, 64<<10)
	for off := 0; off < len(data); {
		n, err := io.ReadFull(f, buf[:min(len(buf), len(data)-off)])
		if !bytes.Equal(buf[:n], data[off:off+n]) {
			return false
		}
		off += n
		if err != nil {
			return off == len(data)
		}
	}
	return true
}
