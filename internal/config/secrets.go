package config

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/steer-dns/steer/internal/diag"
)

// Secret is a password or token the configuration names a file (or an
// environment variable) for. It is read once, when the configuration is
// loaded, and every consumer takes it from the loaded Config, so a file is
// never read twice for one load and a check cannot pass on a file a later
// read would miss. It prints as [secret] (fmt's %v and %s, slog), so a
// logged or printed configuration never shows it; Value returns it.
type Secret struct{ v string }

// Value returns the secret itself.
func (s Secret) Value() string { return s.v }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s.v != "" }

// String returns "[secret]", or "" when the secret is empty.
func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return "[secret]"
}

// GoString is String, so %#v hides the secret too.
func (s Secret) GoString() string { return s.String() }

// LogValue is String, so slog hides the secret.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ReadSecret reads the secret in the file at p (from fsys, or the local
// disk when fsys is nil), trimming surrounding white space; an empty file
// is an error.
func ReadSecret(fsys fs.FS, p string) (Secret, error) {
	b, err := ReadFile(fsys, p)
	if err != nil {
		return Secret{}, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return Secret{}, fmt.Errorf("%s is empty", p)
	}
	return Secret{s}, nil
}

// readSecrets reads every secret the configuration names a file or a
// variable for, once per load, into the Config: the admin API token, the
// anycast peers' TCP MD5 passwords and the etcd password. (The cookie
// secret and the TSIG keys are not single strings: the guard and the
// snapshot read and parse those files, once per load each.)
func (c *Config) readSecrets(probs *diag.Problems) {
	bad := func(key, format string, args ...any) {
		probs.Add(c.File, c.Line(key), "%s: %s", key, fmt.Sprintf(format, args...))
	}
	switch a := &c.API; {
	case a.TokenFile != "":
		s, err := ReadSecret(c.LocalFS(a.TokenFile), c.LocalPath(a.TokenFile))
		if err != nil {
			bad("api.token_file", "admin API token: %v", err)
		}
		a.Token = s
	case a.TokenEnv != "":
		a.Token = Secret{strings.TrimSpace(os.Getenv(a.TokenEnv))}
		if !a.Token.IsSet() {
			bad("api.token_env", "$%s is unset or empty", a.TokenEnv)
		}
	}
	c.readAPICert(bad)
	if r := c.RUM; r != nil && r.TokenFile != "" {
		s, err := ReadSecret(c.LocalFS(r.TokenFile), c.LocalPath(r.TokenFile))
		if err != nil {
			bad("rum.token_file", "beacon token: %v", err)
		}
		r.Token = s
	}
	if c.Anycast != nil {
		for i := range c.Anycast.Peers {
			p := &c.Anycast.Peers[i]
			if p.PasswordFile == "" {
				continue
			}
			key := fmt.Sprintf("anycast.peers[%d].password_file", i)
			if c.Line(key) == 0 {
				key = fmt.Sprintf("anycast.peers[%d]", i)
			}
			s, err := ReadSecret(c.LocalFS(p.PasswordFile), c.LocalPath(p.PasswordFile))
			switch {
			case err != nil:
				bad(key, "%v", err)
			case len(s.v) > 80:
				bad(key, "the password in %s is longer than 80 bytes (TCP MD5 limit)", p.PasswordFile)
			}
			p.Password = s
		}
	}
	if f := c.Fleet; f != nil && f.Etcd.PasswordFile != "" {
		s, err := ReadSecret(c.LocalFS(f.Etcd.PasswordFile), c.LocalPath(f.Etcd.PasswordFile))
		if err != nil {
			bad("fleet.etcd.password_file", "%v", err)
		}
		f.Etcd.Password = s
	}
}

// withSecretsReread is LoadAgain for unchanged bytes: c itself when its
// secrets read back the same, otherwise a copy of c with the new ones.
func (c *Config) withSecretsReread() (*Config, bool, error) {
	cp := *c
	if c.Anycast != nil {
		a := *c.Anycast
		a.Peers = slices.Clone(a.Peers)
		cp.Anycast = &a
	}
	if c.Fleet != nil {
		f := *c.Fleet
		cp.Fleet = &f
	}
	if c.RUM != nil {
		r := *c.RUM
		cp.RUM = &r
	}
	var probs diag.Problems
	cp.readSecrets(&probs)
	if err := probs.Err(); err != nil {
		return nil, false, err
	}
	if cp.API.Token != c.API.Token || c.RUM != nil && cp.RUM.Token != c.RUM.Token || cp.API.tlsPEM != c.API.tlsPEM || c.Fleet != nil && cp.Fleet.Etcd.Password != c.Fleet.Etcd.Password ||
		c.Anycast != nil && !slices.EqualFunc(cp.Anycast.Peers, c.Anycast.Peers, func(a, b AnycastPeer) bool { return a.Password == b.Password }) {
		return &cp, false, nil
	}
	return c, true, nil
}

// readAPICert reads the admin API's certificate chain and key
// (api.tls_cert_file, api.tls_key_file) into API.TLSCert, once per load,
// so a reload serves a renewed certificate and a bad pair is a problem at
// its line.
func (c *Config) readAPICert(bad func(key, format string, args ...any)) {
	a := &c.API
	a.TLSCert, a.tlsPEM = nil, [sha256.Size]byte{}
	if a.TLSCertFile == "" || a.TLSKeyFile == "" {
		return // checked in check
	}
	certPEM, err := ReadFile(c.LocalFS(a.TLSCertFile), c.LocalPath(a.TLSCertFile))
	if err != nil {
		bad("api.tls_cert_file", "%v", err)
		return
	}
	keyPEM, err := ReadFile(c.LocalFS(a.TLSKeyFile), c.LocalPath(a.TLSKeyFile))
	if err != nil {
		bad("api.tls_key_file", "%v", err)
		return
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		bad("api.tls_cert_file", "%s and %s: %v", a.TLSCertFile, a.TLSKeyFile, err)
		return
	}
	sum := sha256.Sum256(append(append(certPEM, 0), keyPEM...))
	a.TLSCert, a.tlsPEM = &cert, sum
}
