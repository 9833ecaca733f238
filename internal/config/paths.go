package config

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/steer-dns/steer/internal/diag"
	"github.com/steer-dns/steer/internal/geo"
)

// Paths. A configuration names files of two kinds.
//
// Files that travel with it: zone files (and what they $INCLUDE), the
// zones' DNSSEC key pairs, the cookie secret and the TSIG key files. In a fleet, steer fleet push puts
// them in the bundle beside the configuration, so every node reads the
// same bytes; they are read through FS at Resolve(p).
//
// Node-local files, which each node has on its own disk: geo databases,
// latency and feed files, the query log, the admin API token and the
// anycast and etcd password files. (Where a node keeps its state is its
// own file's state_dir, never a pushed configuration's.) LocalPath names them
// and LocalFS says where they are read from: an absolute path is always
// the node's own file, opened as such whatever the process's working
// directory; a relative one is relative to the configuration (in FS when
// it has one: the embedded demo). A pushed configuration names them by
// absolute paths (PushProblems).

// LocalPath is the path of the node-local file the configuration names as
// p: p itself when absolute, else relative to the configuration's
// directory (as Resolve).
func (c *Config) LocalPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return c.Resolve(p)
}

// LocalFS is where the node-local file at LocalPath(p) is read from: nil
// (the node's disk) for an absolute path or a configuration on disk, FS
// otherwise.
func (c *Config) LocalFS(p string) fs.FS {
	if filepath.IsAbs(p) {
		return nil
	}
	return c.FS
}

// ReadLocal reads the node-local file the configuration names as p.
func (c *Config) ReadLocal(p string) ([]byte, error) {
	return ReadFile(c.LocalFS(p), c.LocalPath(p))
}

// A PathRef is a file a configuration names, with the key naming it.
type PathRef struct {
	Key  string // the dotted key, e.g. geo.databases[0]
	Path string // as written
	Line int
}

// LocalPaths lists the node-local files the configuration names.
func (c *Config) LocalPaths() []PathRef {
	var out []PathRef
	add := func(key, p string) {
		if p != "" {
			out = append(out, PathRef{Key: key, Path: p, Line: c.Line(key)})
		}
	}
	for i, d := range c.Geo.Databases {
		if d != geo.EmbeddedName {
			add(fmt.Sprintf("geo.databases[%d]", i), d)
		}
	}
	for i, f := range c.Latency.Files {
		add(fmt.Sprintf("latency.files[%d]", i), f)
	}
	add("health.feed_file", c.Health.FeedFile)
	if c.QueryLog.Path != "stdout" {
		add("query_log.path", c.QueryLog.Path)
	}
	add("api.token_file", c.API.TokenFile)
	add("api.tls_cert_file", c.API.TLSCertFile)
	add("api.tls_key_file", c.API.TLSKeyFile)
	if c.RUM != nil {
		add("rum.token_file", c.RUM.TokenFile)
	}
	if c.Anycast != nil {
		for i, p := range c.Anycast.Peers {
			add(fmt.Sprintf("anycast.peers[%d].password_file", i), p.PasswordFile)
		}
	}
	return out
}

// BundledPaths lists the files that travel with the configuration in a
// fleet bundle, but for the files zone files $INCLUDE (the zone package
// finds those): zone files, the DNSSEC key pairs (.key and .private), the
// cookie secret, the TSIG key files.
func (c *Config) BundledPaths() []PathRef {
	var out []PathRef
	for i, z := range c.Zones {
		if z.File != "" {
			key := fmt.Sprintf("zones[%d].file", i)
			out = append(out, PathRef{Key: key, Path: z.File, Line: c.Line(key)})
		}
	}
	for i, z := range c.Zones {
		if z.DNSSEC == nil {
			continue
		}
		for j, k := range z.DNSSEC.Keys {
			key := fmt.Sprintf("zones[%d].dnssec.keys[%d]", i, j)
			for _, ext := range []string{".key", ".private"} {
				out = append(out, PathRef{Key: key, Path: k + ext, Line: c.Line(key)})
			}
		}
	}
	if f := c.Cookies.SecretFile; f != "" {
		out = append(out, PathRef{Key: "cookies.secret_file", Path: f, Line: c.Line("cookies.secret_file")})
	}
	names := make([]string, 0, len(c.TSIG))
	for n := range c.TSIG {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if f := c.TSIG[n].SecretFile; f != "" {
			key := "tsig." + n + ".secret_file"
			ln := c.Line(key)
			if ln == 0 {
				ln = c.Line("tsig." + n)
			}
			out = append(out, PathRef{Key: key, Path: f, Line: ln})
		}
	}
	return out
}

// Secret kinds: what a bundled file holding a secret is, for steer fleet
// push's refusals and for redacting it wherever a bundle is shown.
const (
	// SecretDNSSEC is a DNSSEC private key (.private): whoever holds it
	// signs for the zone.
	SecretDNSSEC = "DNSSEC private key"
	// SecretTSIG is a TSIG key file: whoever holds it transfers the zones
	// and sends NOTIFYs the nodes accept.
	SecretTSIG = "TSIG key"
	// SecretCookie is the DNS cookie secret: whoever holds it mints
	// server cookies every node accepts.
	SecretCookie = "cookie secret"
)

// A SecretRef is a file that travels with the configuration and holds a
// secret: Kind says which (SecretDNSSEC, SecretTSIG, SecretCookie).
type SecretRef struct {
	PathRef
	Kind string
}

// SecretPaths lists the files among BundledPaths that hold secrets: the
// DNSSEC private keys (.private), the TSIG key files and the cookie
// secret. Zone files and the public halves of the keys (.key) are not
// secret.
func (c *Config) SecretPaths() []SecretRef {
	var out []SecretRef
	for _, r := range c.BundledPaths() {
		switch {
		case strings.HasPrefix(r.Key, "zones[") && strings.HasSuffix(r.Path, ".private"):
			out = append(out, SecretRef{r, SecretDNSSEC})
		case strings.HasPrefix(r.Key, "tsig."):
			out = append(out, SecretRef{r, SecretTSIG})
		case r.Key == "cookies.secret_file":
			out = append(out, SecretRef{r, SecretCookie})
		}
	}
	return out
}

// InDir reports whether the file at p, as a configuration in dir names
// it, is dir or below it.
func InDir(dir, p string) bool {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// PushProblems are what makes a configuration on disk unfit to push to a
// fleet, as file:line: a node-local file named by a relative path (each
// node opens it on its own disk, where the configuration's directory means
// nothing) and a file that travels in the bundle but lies outside the
// configuration's directory (the bundle holds the directory's files, by
// their names relative to it). The files zone files $INCLUDE are checked
// by the caller, which reads the zones. The warnings name keys the nodes
// ignore in a pushed configuration: where a node keeps its state is its
// own file's business (state_dir).
func (c *Config) PushProblems() (probs, warns diag.Problems) {
	for _, k := range []string{"state_dir", "health.state_file"} {
		if ln := c.Line(k); ln > 0 {
			warns.Add(c.File, ln, "warning: %s is ignored by the nodes of a fleet: each keeps its state in the state_dir of its own file", k)
		}
	}
	for _, r := range c.LocalPaths() {
		if !filepath.IsAbs(r.Path) {
			probs.Add(c.File, r.Line, "%s: %q is relative: in a pushed configuration a node-local file is named by its absolute path on each node", r.Key, r.Path)
		}
	}
	dir := filepath.Dir(c.File)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	for _, r := range c.BundledPaths() {
		if !InDir(dir, r.Path) {
			probs.Add(c.File, r.Line, "%s: %q is outside the configuration's directory %s: files pushed with it must be in that directory or below", r.Key, r.Path, dir)
		}
	}
	return probs, warns
}
