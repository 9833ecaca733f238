package keyroll

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// Dir is the directory of the state directory that holds the plans.
const Dir = "keyroll"

// File is where the plan of zone is kept in the state directory
// stateDir: keyroll/<zone>.json ("root.json" for the root zone).
func File(stateDir, zone string) string {
	name := strings.TrimSuffix(dns.CanonicalName(zone), ".")
	if name == "" {
		name = "root"
	}
	// A name's labels may hold any octet in escaped form; a path
	// separator must not make a directory.
	name = strings.NewReplacer("/", "%2F", `\`, "%5C").Replace(name)
	return filepath.Join(stateDir, Dir, name+".json")
}

// Encode returns the plan as JSON (what Save writes and Decode reads),
// private keys included.
func (p *Plan) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Decode reads a plan that Encode wrote; name names it in errors (a file
// or a store key). It checks what a plan must be to be used: the format
// version, a zone, and every key that is not removed a key pair of the
// zone whose tag, algorithm and role are what the plan says.
func Decode(name string, b []byte) (*Plan, error) {
	var p Plan
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: corrupt key plan: %v", name, err)
	}
	if p.Version != Version {
		return nil, fmt.Errorf("%s: key plan version %d; this steer reads version %d", name, p.Version, Version)
	}
	if p.Zone == "" || p.Zone != dns.CanonicalName(p.Zone) {
		return nil, fmt.Errorf("%s: corrupt key plan: zone %q is not a canonical name", name, p.Zone)
	}
	for i, k := range p.Keys {
		if k == nil {
			return nil, fmt.Errorf("%s: corrupt key plan: key %d is null", name, i)
		}
		switch k.Role {
		case RoleKSK, RoleZSK, RoleCSK:
		default:
			return nil, fmt.Errorf("%s: corrupt key plan: key %d has role %q", name, k.Tag, k.Role)
		}
		if k.Private == "" {
			if !k.Remove.IsZero() {
				continue // removed: only its public half is kept
			}
			return nil, fmt.Errorf("%s: corrupt key plan: %s has no private key and is not removed", name, k.Name())
		}
		key, err := dnssec.ParseKey(fmt.Sprintf("%s: key %d", name, k.Tag), []byte(k.DNSKEY), []byte(k.Private))
		if err != nil {
			return nil, fmt.Errorf("corrupt key plan: %v", err)
		}
		if key.DNSKEY.Hdr.Name != p.Zone || key.Tag != k.Tag || key.DNSKEY.Algorithm != k.Algorithm || key.SEP() == (k.Role == RoleZSK) {
			return nil, fmt.Errorf("%s: corrupt key plan: key %d is %s, tag %d, algorithm %d, flags %d; the plan says %s %d of %s, algorithm %d",
				name, k.Tag, key.DNSKEY.Hdr.Name, key.Tag, key.DNSKEY.Algorithm, key.DNSKEY.Flags, k.Role, k.Tag, p.Zone, k.Algorithm)
		}
		key.File = k.File
		if key.File == "" {
			key.File = key.BaseName()
		}
		k.key = key
	}
	return &p, nil
}

// Load reads the plan at path (see File). A missing file is an error
// that errors.Is fs.ErrNotExist (the caller starts a plan with New); a
// corrupt one an error naming the file, never a plan.
func Load(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Decode(path, b)
}

// Save writes p to path atomically (a temporary file in the same
// directory, synced, renamed over path), readable by its owner alone: it
// holds private keys. The directory is made (0700) when missing.
func Save(path string, p *Plan) error {
	b, err := p.Encode()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file 0600; chmod anyway, so a changed default
	// never widens it.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
