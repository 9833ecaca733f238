package snapshot

import (
	"bytes"
	"errors"
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

// saveCopy writes z's source to its cache file in dir when it differs
// from what is there, atomically: a crash leaves the old copy or the new
// one, never half of one.
func saveCopy(dir string, z *zone.Zone) (path string, err error) {
	path = filepath.Join(dir, CacheFile(z.Origin))
	src := z.Source()
	if src == nil {
		return path, nil
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, src) {
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
