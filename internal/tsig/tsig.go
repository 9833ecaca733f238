// Package tsig owns TSIG key definitions (RFC 8945): reading the key files
// BIND's tsig-keygen writes and validating keys (name, algorithm, secret
// length), the NOTAUTH answer to a request whose TSIG did not verify
// (ErrorReply), and a dns.ResponseWriter over a TCP connection that
// verifies a request and signs each message of its answer in a chain
// (NewConnWriter), for a server that reads requests itself. Messages are
// signed and verified through a Keyring, which binds each key to its
// algorithm (a key defined as hmac-sha256 verifies nothing else): hand
// NewKeyring(keys...) to dns.Client.TsigProvider, dns.Transfer.TsigProvider
// or dns.Server.TsigProvider (never a TsigSecret map, which takes any
// algorithm the message names), or to dns.TsigGenerateWithProvider and
// dns.TsigVerifyWithProvider, and pass Key.Name and Key.Algorithm to
// dns.Msg.SetTsig.
package tsig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// Key is one TSIG key.
type Key struct {
	// Name is canonical: lower-case and absolute ("xfr-key."), which is
	// how miekg/dns looks the secret up.
	Name string
	// Algorithm is a miekg/dns constant, e.g. dns.HmacSHA256.
	Algorithm string
	// Secret is the base64 text miekg/dns wants.
	Secret string
}

// Weak reports whether the key uses an algorithm that is accepted but no
// longer recommended (hmac-sha1): callers should warn about it.
func (k Key) Weak() bool { return k.Algorithm == dns.HmacSHA1 }

// algorithm describes one accepted HMAC: its miekg constant and its output
// size in bytes.
type algorithm struct {
	miekg string
	size  int
}

// algorithms are keyed by the name operators write (BIND's, without the
// trailing dot). miekg/dns v1.1.73 supports all of these.
var algorithms = map[string]algorithm{
	"hmac-sha1":   {dns.HmacSHA1, 20},
	"hmac-sha224": {dns.HmacSHA224, 28},
	"hmac-sha256": {dns.HmacSHA256, 32},
	"hmac-sha384": {dns.HmacSHA384, 48},
	"hmac-sha512": {dns.HmacSHA512, 64},
}

// MinSecretBytes is the shortest secret accepted for any algorithm. RFC 8945
// §6 asks for at least half the HMAC output; below 16 bytes is refused
// outright, and the half-output rule is enforced on top of it.
const MinSecretBytes = 16

// Algorithms returns the accepted algorithm names as operators write them,
// sorted.
func Algorithms() []string {
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewKey validates a key as written by an operator (algorithm with or
// without the trailing dot, any case) and returns it in canonical form.
func NewKey(name, alg, secret string) (Key, error) {
	if name == "" {
		return Key{}, fieldErr("name", "empty key name")
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return Key{}, fieldErr("name", fmt.Sprintf("key name %q is not a domain name", name))
	}
	a := strings.TrimSuffix(strings.ToLower(alg), ".")
	if a == "" {
		return Key{}, fieldErr("algorithm", "missing algorithm")
	}
	if a == "hmac-md5" || a == "hmac-md5.sig-alg.reg.int" {
		return Key{}, fieldErr("algorithm", fmt.Sprintf("algorithm %s is refused: RFC 8945 §6 deprecates HMAC-MD5; generate a new key with tsig-keygen -a hmac-sha256 (accepted: %s)", alg, strings.Join(Algorithms(), ", ")))
	}
	info, ok := algorithms[a]
	if !ok {
		return Key{}, fieldErr("algorithm", fmt.Sprintf("unknown algorithm %q (accepted: %s)", alg, strings.Join(Algorithms(), ", ")))
	}
	if secret == "" {
		return Key{}, fieldErr("secret", "missing secret")
	}
	raw, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		return Key{}, fieldErr("secret", fmt.Sprintf("secret is not base64: %v", err))
	}
	min := max(MinSecretBytes, info.size/2)
	if len(raw) < min {
		return Key{}, fieldErr("secret", fmt.Sprintf("secret is %d bytes, %s needs at least %d (RFC 8945 §6: half the HMAC output, never under %d)", len(raw), a, min, MinSecretBytes))
	}
	return Key{Name: dns.CanonicalName(name), Algorithm: info.miekg, Secret: secret}, nil
}

// Algorithm returns the miekg/dns constant of the algorithm an operator
// wrote (with or without the trailing dot, any case), or an error naming
// the accepted ones.
func Algorithm(alg string) (string, error) {
	a := strings.TrimSuffix(strings.ToLower(alg), ".")
	if a == "hmac-md5" || a == "hmac-md5.sig-alg.reg.int" {
		return "", fmt.Errorf("algorithm %s is refused: RFC 8945 §6 deprecates HMAC-MD5 (accepted: %s)", alg, strings.Join(Algorithms(), ", "))
	}
	info, ok := algorithms[a]
	if !ok {
		return "", fmt.Errorf("unknown algorithm %q (accepted: %s)", alg, strings.Join(Algorithms(), ", "))
	}
	return info.miekg, nil
}

// keyError is a NewKey error; field ("name", "algorithm", "secret") lets
// ParseFile point at the offending line.
type keyError struct{ field, msg string }

func (e *keyError) Error() string { return e.msg }

func fieldErr(field, msg string) error { return &keyError{field, msg} }

// Secrets returns the map[name]secret that miekg/dns's Client.TsigSecret
// and Server.TsigSecret take. They accept any algorithm over the secret:
// steer itself uses a Keyring; this is for tests playing a peer.
func Secrets(keys []Key) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k.Name] = k.Secret
	}
	return m
}

// ErrorReply is the answer to a request whose TSIG did not verify (RFC
// 8945 §5.2): NOTAUTH, with a TSIG record carrying the error — BADKEY for
// an unknown key or algorithm, BADTIME for a time out of the fudge,
// BADSIG otherwise — and unsigned, since the key could not be used. A
// TSIG record too malformed to echo (no algorithm name) gets FORMERR
// without one. req must carry a TSIG record.
func ErrorReply(req *dns.Msg, err error) *dns.Msg {
	t := req.IsTsig()
	m := new(dns.Msg)
	if t == nil || t.Algorithm == "" || t.Algorithm == "." {
		m.SetRcode(req, dns.RcodeFormatError)
		m.Extra = nil
		return m
	}
	m.SetRcode(req, dns.RcodeNotAuth)
	m.Extra = nil
	code := uint16(dns.RcodeBadSig)
	switch {
	case errors.Is(err, dns.ErrSecret), errors.Is(err, dns.ErrKeyAlg):
		code = dns.RcodeBadKey
	case errors.Is(err, dns.ErrTime):
		code = dns.RcodeBadTime
	}
	m.Extra = []dns.RR{&dns.TSIG{Hdr: dns.RR_Header{Name: t.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm: t.Algorithm, Fudge: t.Fudge, TimeSigned: t.TimeSigned, OrigId: req.Id, Error: code}}
	return m
}
