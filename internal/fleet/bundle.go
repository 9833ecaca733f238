package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The keys of the fleet under its prefix P (the layout steer's nodes and
// steer fleet agree on):
//
//	P/config/meta          the current bundle's Meta (JSON); its mod
//	                       revision is the bundle's revision
//	P/config/canary        the canary bundle's Meta, with the nodes that
//	                       serve it (Meta.Canary), while a canary runs
//	P/config/previous      the bundle the current one replaced, kept for
//	                       steer fleet rollback
//	P/config/blob/SHA256   file contents, by their SHA-256 (hex): the
//	                       metas map each file name to one (Meta.Blobs), so
//	                       the three bundles share what they have in common
//	                       and a push writes only the files that changed
//	P/config/serial        the highest serial given so far (decimal), so
//	                       a serial is never given twice
//	P/nodes/NODE           each node's Status (JSON), under its lease
//
// Blobs no meta names are deleted in the transaction that drops the last
// reference, so the store holds at most three bundles. A meta without
// Blobs (written by an older steer) names its files under P/config/file/;
// the next publication moves them to blobs.
const (
	configPrefix = "/config/"
	metaKey      = "/config/meta"
	canaryKey    = "/config/canary"
	previousKey  = "/config/previous"
	blobPrefix   = "/config/blob/"
	serialKey    = "/config/serial"
	filePrefix   = "/config/file/"
	nodesPrefix  = "/nodes/"
)

// ConfigName is the name of the configuration in a bundle; the files it
// names are stored by their names as the configuration resolves them
// (BundleName).
const ConfigName = "steer.yaml"

// MaxFiles is the most files one bundle may have: a publication writes
// them and the meta in one transaction.
const MaxFiles = MaxTxnOps - 1

// Meta describes a published bundle.
type Meta struct {
	// Serial counts publications: each push is one more than any bundle
	// kept in the store. A promoted canary and a rolled back bundle keep
	// theirs.
	Serial int64 `json:"serial"`
	// Files lists the bundle's file names, the configuration first.
	Files []string `json:"files"`
	// Blobs maps each file name to the SHA-256 (hex) of its contents,
	// the key it is stored under.
	Blobs map[string]string `json:"blobs,omitempty"`
	// Digest identifies the bundle's contents (Digest).
	Digest string `json:"digest,omitempty"`
	// Canary names the nodes that serve a canary bundle.
	Canary []string `json:"canary,omitempty"`
	// PushedAt and PushedBy say when and from where it was pushed.
	PushedAt time.Time `json:"pushed_at"`
	PushedBy string    `json:"pushed_by,omitempty"`
}

// Bundle is a configuration and the files it names, as one unit.
type Bundle struct {
	Meta Meta
	// Rev is the store revision that published it (0: not published):
	// the mod revision of the key its meta is under.
	Rev int64
	// Files holds every file, the configuration under ConfigName.
	Files map[string][]byte
}

// Digest is the SHA-256 (hex) of a bundle's contents: every file name and
// its bytes, in name order. Two bundles with the same files have the same
// digest, whatever their serial.
func Digest(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var n [8]byte
	for _, name := range names {
		binary.BigEndian.PutUint64(n[:], uint64(len(name)))
		h.Write(n[:])
		h.Write([]byte(name))
		binary.BigEndian.PutUint64(n[:], uint64(len(files[name])))
		h.Write(n[:])
		h.Write(files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ShortDigest is the first 12 hex digits of a digest, as status shows it.
func ShortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// Digest is the digest of b's files (Digest).
func (b Bundle) Digest() string {
	if b.Rev == 0 && len(b.Files) == 0 {
		return ""
	}
	return Digest(b.Files)
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

// Errors of publication and rollout.
var (
	// ErrConflict says a publication lost a race: the bundles changed
	// since the revision the publisher read.
	ErrConflict = errors.New("the published configuration changed meanwhile")
	// ErrCanary says a canary is running: promote it or roll it back
	// before a plain push.
	ErrCanary = errors.New("a canary bundle is being tried")
	// ErrNothing says there is nothing to promote or roll back to.
	ErrNothing = errors.New("nothing to do")
)

// Published is what the store holds of the fleet's configuration: the
// current bundle every node serves, the canary the named nodes serve
// instead (Rev 0: none) and the previous bundle (Rev 0: none) that a
// rollback restores.
type Published struct {
	Current, Canary, Previous Bundle
	// blobs and legacy are the content keys present, for a publication.
	blobs  map[string]bool
	legacy []string
	serial int64 // P/config/serial
}

// For is the bundle node serves: the canary when it names node, else the
// current one.
func (p Published) For(node string) Bundle {
	if p.Canary.Rev != 0 && slices.Contains(p.Canary.Meta.Canary, node) {
		return p.Canary
	}
	return p.Current
}

// ReadPublished reads the current, canary and previous bundles
// (linearizably).
func ReadPublished(ctx context.Context, s Store, prefix string) (Published, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	kvs, _, err := s.Get(ctx, prefix+configPrefix)
	if err != nil {
		return Published{}, err
	}
	return PublishedOf(prefix, kvs)
}

// ReadBundle reads the current bundle (linearizably); a fleet with none
// yet gives a Bundle with Rev 0.
func ReadBundle(ctx context.Context, s Store, prefix string) (Bundle, error) {
	p, err := ReadPublished(ctx, s, prefix)
	return p.Current, err
}

// BundleOf assembles the current bundle from the keys under P/config/ (as
// a Get or a Follow snapshot gives them). A meta that names a file the
// keys do not have is an error: the bundle is incomplete.
func BundleOf(prefix string, kvs []KV) (Bundle, error) {
	p, err := PublishedOf(prefix, kvs)
	return p.Current, err
}

// PublishedOf assembles every bundle from the keys under P/config/.
func PublishedOf(prefix string, kvs []KV) (Published, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	p := Published{blobs: map[string]bool{}}
	metas := map[string]KV{}
	blobs := map[string][]byte{}
	legacy := map[string][]byte{}
	for _, kv := range kvs {
		switch k := strings.TrimPrefix(kv.Key, prefix); {
		case k == metaKey || k == canaryKey || k == previousKey:
			metas[k] = kv
		case k == serialKey:
			p.serial, _ = strconv.ParseInt(string(kv.Value), 10, 64)
		case strings.HasPrefix(k, blobPrefix):
			blobs[strings.TrimPrefix(k, blobPrefix)] = kv.Value
			p.blobs[strings.TrimPrefix(k, blobPrefix)] = true
		case strings.HasPrefix(k, filePrefix):
			legacy[strings.TrimPrefix(k, filePrefix)] = kv.Value
			p.legacy = append(p.legacy, kv.Key)
		}
	}
	for k, dst := range map[string]*Bundle{metaKey: &p.Current, canaryKey: &p.Canary, previousKey: &p.Previous} {
		kv, ok := metas[k]
		if !ok {
			*dst = Bundle{Files: map[string][]byte{}}
			continue
		}
		b := Bundle{Rev: kv.Rev, Files: map[string][]byte{}}
		if err := json.Unmarshal(kv.Value, &b.Meta); err != nil {
			return Published{}, fmt.Errorf("%s: %v", kv.Key, err)
		}
		for _, name := range b.Meta.Files {
			var data []byte
			var ok bool
			if b.Meta.Blobs != nil {
				data, ok = blobs[b.Meta.Blobs[name]]
			} else {
				data, ok = legacy[name]
			}
			if !ok {
				return Published{}, fmt.Errorf("bundle serial %d at revision %d (%s): file %s is missing", b.Meta.Serial, b.Rev, kv.Key, name)
			}
			b.Files[name] = data
		}
		*dst = b
	}
	return p, nil
}

// Publish writes b as the fleet's current bundle in one transaction, if
// the current bundle is still the one at revision expect (0: none has
// been published) and no canary is running (ErrCanary): the bundle it
// replaces becomes the previous one. It returns the new revision and
// serial; a lost race is ErrConflict, and nothing is written.
func Publish(ctx context.Context, s Store, prefix string, b Bundle, expect int64) (rev, serial int64, err error) {
	if err := checkBundle(b); err != nil {
		return 0, 0, err
	}
	cur, err := ReadPublished(ctx, s, prefix)
	if err != nil {
		return 0, 0, err
	}
	if cur.Current.Rev != expect {
		return 0, 0, fmt.Errorf("publish: %w (published at revision %d, expected %d)", ErrConflict, cur.Current.Rev, expect)
	}
	if cur.Canary.Rev != 0 {
		return 0, 0, fmt.Errorf("publish: %w (serial %d on %s): promote or roll it back first", ErrCanary, cur.Canary.Meta.Serial, strings.Join(cur.Canary.Meta.Canary, ","))
	}
	b.Meta.Serial = cur.maxSerial() + 1
	b.Meta.Canary = nil
	next := cur.next()
	next.Current = &b
	if cur.Current.Rev != 0 {
		next.Previous = &cur.Current
	}
	rev, err = commit(ctx, s, prefix, &cur, next)
	return rev, b.Meta.Serial, err
}

// PublishCanary writes b as the canary bundle, served by nodes only, on
// top of the current bundle at revision expect; a canary already running
// is replaced. The current and previous bundles stay as they are.
func PublishCanary(ctx context.Context, s Store, prefix string, b Bundle, nodes []string, expect int64) (rev, serial int64, err error) {
	if err := checkBundle(b); err != nil {
		return 0, 0, err
	}
	if len(nodes) == 0 {
		return 0, 0, errors.New("publish canary: no nodes named")
	}
	cur, err := ReadPublished(ctx, s, prefix)
	if err != nil {
		return 0, 0, err
	}
	if cur.Current.Rev == 0 {
		return 0, 0, errors.New("publish canary: nothing is published yet, so there is nothing to compare it with: push without --canary first")
	}
	if cur.Current.Rev != expect {
		return 0, 0, fmt.Errorf("publish canary: %w (published at revision %d, expected %d)", ErrConflict, cur.Current.Rev, expect)
	}
	b.Meta.Serial = cur.maxSerial() + 1
	b.Meta.Canary = slices.Clone(nodes)
	next := cur.next()
	next.Canary = &b
	rev, err = commit(ctx, s, prefix, &cur, next)
	return rev, b.Meta.Serial, err
}

// Promote makes the canary bundle the current one, on every node; the
// bundle it replaces becomes the previous one. It returns the bundle now
// current.
func Promote(ctx context.Context, s Store, prefix string) (Bundle, error) {
	cur, err := ReadPublished(ctx, s, prefix)
	if err != nil {
		return Bundle{}, err
	}
	if cur.Canary.Rev == 0 {
		return Bundle{}, fmt.Errorf("promote: %w: no canary is running", ErrNothing)
	}
	b := cur.Canary
	b.Meta.Canary = nil
	next := cur.next()
	next.Current, next.Canary, next.Previous = &b, nil, &cur.Current
	b.Rev, err = commit(ctx, s, prefix, &cur, next)
	return b, err
}

// Rollback undoes the last step: a running canary is withdrawn (its nodes
// go back to the current bundle); otherwise the previous bundle becomes
// the current one again, and no previous one is kept. It returns the
// bundle every node is to serve and what it undid.
func Rollback(ctx context.Context, s Store, prefix string) (now, undone Bundle, err error) {
	cur, err := ReadPublished(ctx, s, prefix)
	if err != nil {
		return Bundle{}, Bundle{}, err
	}
	next := cur.next()
	switch {
	case cur.Canary.Rev != 0:
		next.Canary = nil
		_, err = commit(ctx, s, prefix, &cur, next)
		return cur.Current, cur.Canary, err
	case cur.Previous.Rev != 0:
		b := cur.Previous
		next.Current, next.Previous = &b, nil
		b.Rev, err = commit(ctx, s, prefix, &cur, next)
		return b, cur.Current, err
	}
	return Bundle{}, Bundle{}, fmt.Errorf("rollback: %w: no canary is running and no previous bundle is kept", ErrNothing)
}

func serialOf(b *Bundle) int64 {
	if b == nil {
		return 0
	}
	return b.Meta.Serial
}

func checkBundle(b Bundle) error {
	if _, ok := b.Files[ConfigName]; !ok {
		return fmt.Errorf("publish: the bundle has no %s", ConfigName)
	}
	if len(b.Files) > MaxFiles {
		return fmt.Errorf("publish: %d files, at most %d in one bundle: %w", len(b.Files), MaxFiles, ErrTooManyOps)
	}
	return nil
}

func (p Published) maxSerial() int64 {
	return max(p.serial, p.Current.Meta.Serial, p.Canary.Meta.Serial, p.Previous.Meta.Serial)
}

// rollout is what a publication leaves under each meta key: nil for
// none; the same *Bundle as read for one left as it is.
type rollout struct{ Current, Canary, Previous *Bundle }

// next is p unchanged.
func (p *Published) next() rollout {
	var r rollout
	if p.Current.Rev != 0 {
		r.Current = &p.Current
	}
	if p.Canary.Rev != 0 {
		r.Canary = &p.Canary
	}
	if p.Previous.Rev != 0 {
		r.Previous = &p.Previous
	}
	return r
}

// commit writes next over cur in one transaction that holds only if none
// of the three meta keys changed since cur was read: metas that change
// are put, those that go are deleted, blobs the new metas name and the
// store lacks are put, and blobs (and files of the old layout) nothing
// names any more are deleted. It returns the revision after it.
func commit(ctx context.Context, s Store, prefix string, cur *Published, next rollout) (int64, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	type slot struct {
		key      string
		old      *Bundle
		new      *Bundle
		oldExist bool
	}
	slots := []slot{
		{prefix + metaKey, &cur.Current, next.Current, cur.Current.Rev != 0},
		{prefix + canaryKey, &cur.Canary, next.Canary, cur.Canary.Rev != 0},
		{prefix + previousKey, &cur.Previous, next.Previous, cur.Previous.Rev != 0},
	}
	var cmps []Cmp
	var puts []KV
	var deletes []string
	need := map[string][]byte{}
	for _, sl := range slots {
		cmps = append(cmps, ModRevIs(sl.key, sl.old.Rev))
		if sl.new == nil {
			if sl.oldExist {
				deletes = append(deletes, sl.key)
			}
			continue
		}
		meta := sl.new.Meta
		meta.Files = sortedNames(sl.new.Files)
		meta.Blobs = make(map[string]string, len(meta.Files))
		for _, name := range meta.Files {
			sum := sha256.Sum256(sl.new.Files[name])
			h := hex.EncodeToString(sum[:])
			meta.Blobs[name] = h
			need[h] = sl.new.Files[name]
		}
		meta.Digest = Digest(sl.new.Files)
		// A bundle left in its slot is not written again, unless it is
		// in the old layout.
		if sl.new == sl.old && sl.old.Meta.Blobs != nil {
			continue
		}
		raw, err := json.Marshal(meta)
		if err != nil {
			return 0, err
		}
		puts = append(puts, KV{Key: sl.key, Value: raw})
	}
	for _, h := range slices.Sorted(maps.Keys(need)) {
		if !cur.blobs[h] {
			puts = append(puts, KV{Key: prefix + blobPrefix + h, Value: need[h]})
		}
	}
	for _, h := range slices.Sorted(maps.Keys(cur.blobs)) {
		if _, ok := need[h]; !ok {
			deletes = append(deletes, prefix+blobPrefix+h)
		}
	}
	deletes = append(deletes, cur.legacy...)
	if top := max(cur.maxSerial(), serialOf(next.Current), serialOf(next.Canary)); top > cur.serial {
		puts = append(puts, KV{Key: prefix + serialKey, Value: []byte(strconv.FormatInt(top, 10))})
	}
	ok, rev, err := s.Txn(ctx, cmps, puts, deletes)
	if err != nil {
		return 0, fmt.Errorf("publish (%d puts, %d deletes): %w", len(puts), len(deletes), err)
	}
	if !ok {
		return 0, fmt.Errorf("publish: %w", ErrConflict)
	}
	return rev, nil
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
	// Serial, Rev and Digest are the bundle it serves (0: none from the
	// fleet); Canary is set when that is the canary bundle.
	Serial int64  `json:"serial"`
	Rev    int64  `json:"rev"`
	Digest string `json:"digest,omitempty"`
	Canary bool   `json:"canary,omitempty"`
	// Error says why the newest bundle for the node is not served, ""
	// when it is; ErrorRev, ErrorSerial and ErrorDigest name that bundle.
	Error       string `json:"error,omitempty"`
	ErrorRev    int64  `json:"error_rev,omitempty"`
	ErrorSerial int64  `json:"error_serial,omitempty"`
	ErrorDigest string `json:"error_digest,omitempty"`
	// Pending counts operator overrides set on this node that the store
	// has not taken yet ("pending: fleet").
	Pending int `json:"pending,omitempty"`
	// PendingLoads counts pools' loads put on this node that the store
	// has not taken yet.
	PendingLoads int `json:"pending_loads,omitempty"`
	// Warning is what the node finds wrong with the store itself (its
	// database past half its quota), "" when nothing.
	Warning string `json:"warning,omitempty"`
	// ViewAt is when the node last had a complete view of the store.
	ViewAt  time.Time `json:"view_at"`
	Version string    `json:"version,omitempty"`
	Since   time.Time `json:"since"`
	// HealthMode is how the node decides health: "quorum" (the fleet's
	// view, live), "frozen since T" (the store lost, the view kept as it
	// was at T), "local since T" (no view for view_grace: its own checks
	// decide) or "local" (health not shared).
	HealthMode string `json:"health_mode,omitempty"`
	// The node's identity as its own file gives it (node:): its name
	// when other than Node, its country and location (for maps, and for
	// explaining a query as this node answers it).
	NodeName string   `json:"node_name,omitempty"`
	Country  string   `json:"country,omitempty"`
	Lat      *float64 `json:"lat,omitempty"`
	Lon      *float64 `json:"lon,omitempty"`
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
