package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// The keys of the fleet under its prefix P (the layout steer's nodes and
// steer fleet agree on):
//
//	P/config/meta          the published bundle's Meta (JSON); its mod
//	                       revision is the bundle's revision
//	P/config/file/NAME     the bundle's files, by name
//	P/nodes/NODE           each node's Status (JSON), under its lease
const (
	configPrefix = "/config/"
	metaKey      = "/config/meta"
	filePrefix   = "/config/file/"
	nodesPrefix  = "/nodes/"
)

// ConfigName is the name of the configuration in a bundle; the files it
// names are stored by their names as the configuration resolves them
// (BundleName).
const ConfigName = "steer.yaml"

// Meta describes a published bundle.
type Meta struct {
	// Serial counts publications: each push is one more than the last.
	Serial int64 `json:"serial"`
	// Files lists the bundle's file names, the configuration first.
	Files []string `json:"files"`
	// PushedAt and PushedBy say when and from where it was pushed.
	PushedAt time.Time `json:"pushed_at"`
	PushedBy string    `json:"pushed_by,omitempty"`
}

// Bundle is a configuration and the files it names, as one unit.
type Bundle struct {
	Meta Meta
	// Rev is the store revision that published it (0: not published).
	Rev int64
	// Files holds every file, the configuration under ConfigName.
	Files map[string][]byte
}

// BundleName is the name a file the configuration names as p is stored
// under: p cleaned, relative to the configuration's directory, or without
// its leading slash when absolute (as config.Resolve reads from an FS).
func BundleName(p string) string {
	if path.IsAbs(p) {
		return strings.TrimPrefix(path.Clean(p), "/")
	}
	return path.Clean(p)
}

// ErrConflict says a publication lost a race: the bundle changed since
// the revision the publisher read.
var ErrConflict = errors.New("the published configuration changed meanwhile")

// Publish writes b as the fleet's configuration in one transaction, if the
// published bundle is still the one at revision expect (0: none has been
// published): the meta and every file are put, and files of the previous
// bundle that b does not have are deleted. It returns the new revision and
// serial; a lost race is ErrConflict, and nothing is written.
func Publish(ctx context.Context, s Store, prefix string, b Bundle, expect int64) (rev, serial int64, err error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if _, ok := b.Files[ConfigName]; !ok {
		return 0, 0, fmt.Errorf("publish: the bundle has no %s", ConfigName)
	}
	cur, err := ReadBundle(ctx, s, prefix)
	if err != nil {
		return 0, 0, err
	}
	if cur.Rev != expect {
		return 0, 0, fmt.Errorf("publish: %w (published at revision %d, expected %d)", ErrConflict, cur.Rev, expect)
	}
	meta := b.Meta
	meta.Serial = cur.Meta.Serial + 1
	meta.Files = sortedNames(b.Files)
	raw, err := json.Marshal(meta)
	if err != nil {
		return 0, 0, err
	}
	puts := []KV{{Key: prefix + metaKey, Value: raw}}
	for _, name := range meta.Files {
		puts = append(puts, KV{Key: prefix + filePrefix + name, Value: b.Files[name]})
	}
	var deletes []string
	for name := range cur.Files {
		if _, ok := b.Files[name]; !ok {
			deletes = append(deletes, prefix+filePrefix+name)
		}
	}
	cmp := Absent(prefix + metaKey)
	if expect != 0 {
		cmp = ModRevIs(prefix+metaKey, expect)
	}
	ok, rev, err := s.Txn(ctx, []Cmp{cmp}, puts, deletes)
	if err != nil {
		return 0, 0, fmt.Errorf("publish %d files: %w", len(puts)-1, err)
	}
	if !ok {
		return 0, 0, fmt.Errorf("publish: %w", ErrConflict)
	}
	return rev, meta.Serial, nil
}

// ReadBundle reads the published bundle (linearizably); a fleet with none
// yet gives a Bundle with Rev 0.
func ReadBundle(ctx context.Context, s Store, prefix string) (Bundle, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	kvs, _, err := s.Get(ctx, prefix+configPrefix)
	if err != nil {
		return Bundle{}, err
	}
	return BundleOf(prefix, kvs)
}

// BundleOf assembles the bundle from the keys under P/config/ (as a Get
// or a Follow snapshot gives them). A meta that lists a file the keys do
// not have is an error: the bundle is incomplete.
func BundleOf(prefix string, kvs []KV) (Bundle, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	b := Bundle{Files: map[string][]byte{}}
	var haveMeta bool
	for _, kv := range kvs {
		switch {
		case kv.Key == prefix+metaKey:
			if err := json.Unmarshal(kv.Value, &b.Meta); err != nil {
				return Bundle{}, fmt.Errorf("%s: %v", kv.Key, err)
			}
			b.Rev, haveMeta = kv.Rev, true
		case strings.HasPrefix(kv.Key, prefix+filePrefix):
			b.Files[strings.TrimPrefix(kv.Key, prefix+filePrefix)] = kv.Value
		}
	}
	if !haveMeta {
		return Bundle{Files: map[string][]byte{}}, nil
	}
	for _, name := range b.Meta.Files {
		if _, ok := b.Files[name]; !ok {
			return Bundle{}, fmt.Errorf("bundle serial %d at revision %d: file %s is missing", b.Meta.Serial, b.Rev, name)
		}
	}
	return b, nil
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		if n != ConfigName {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return append([]string{ConfigName}, names...)
}

// FS serves the bundle's files, read-only; a name it does not hold is
// opened from fallback (the node's own disk, for files a configuration
// names that are not pushed: geo databases, latency and feed files), or
// does not exist when fallback is nil.
func (b Bundle) FS(fallback fs.FS) fs.FS { return bundleFS{files: b.Files, fallback: fallback} }

type bundleFS struct {
	files    map[string][]byte
	fallback fs.FS
}

func (f bundleFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := f.files[name]; ok {
		return &memFile{name: name, r: bytes.NewReader(data), size: int64(len(data))}, nil
	}
	if f.fallback != nil {
		return f.fallback.Open(name)
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

type memFile struct {
	name string
	r    *bytes.Reader
	size int64
}

func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{m}, nil }
func (m *memFile) Read(p []byte) (int, error) { return m.r.Read(p) }
func (m *memFile) Close() error               { return nil }

var _ io.Reader = (*memFile)(nil)

type memInfo struct{ f *memFile }

func (i memInfo) Name() string       { return path.Base(i.f.name) }
func (i memInfo) Size() int64        { return i.f.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// Status is what a node says of itself under P/nodes/NODE, for steer fleet
// status: which bundle it serves, and why not the newest.
type Status struct {
	Node   string `json:"node"`
	Region string `json:"region,omitempty"`
	// Serial and Rev are the bundle it serves (0: none from the fleet).
	Serial int64 `json:"serial"`
	Rev    int64 `json:"rev"`
	// Error says why the newest bundle is not served, "" when it is.
	Error string `json:"error,omitempty"`
	// ErrorRev is the revision Error is about.
	ErrorRev int64 `json:"error_rev,omitempty"`
	// ViewAt is when the node last had a complete view of the store.
	ViewAt  time.Time `json:"view_at"`
	Version string    `json:"version,omitempty"`
	Since   time.Time `json:"since"`
}

// StatusKey is where node's Status lives.
func StatusKey(prefix, node string) string {
	return strings.TrimSuffix(prefix, "/") + nodesPrefix + node
}

// ReadStatuses reads every live node's Status, by node name.
func ReadStatuses(ctx context.Context, s Store, prefix string) ([]Status, error) {
	kvs, _, err := s.Get(ctx, strings.TrimSuffix(prefix, "/")+nodesPrefix)
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, kv := range kvs {
		var st Status
		if err := json.Unmarshal(kv.Value, &st); err != nil {
			return nil, fmt.Errorf("%s: %v", kv.Key, err)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// ConfigPrefix is the prefix a node follows for the bundle.
func ConfigPrefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + configPrefix }
