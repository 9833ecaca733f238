package tsig

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/miekg/dns"
)

// Keyring is a set of keys by canonical name that signs and verifies
// with each key's own algorithm only. miekg/dns's TsigSecret maps a name
// to a secret and uses whatever algorithm a message names, so a key
// defined as hmac-sha256 would verify a message MACed with hmac-sha1 (or
// any other) over the same secret: RFC 8945 §5.2.1 binds the algorithm
// to the key, as BIND, Knot and NSD do. As a dns.TsigProvider (for
// dns.Client, dns.Transfer and dns.Server) it fails a message whose TSIG
// names a key not in the ring with dns.ErrSecret, and one that names
// another algorithm than the key's with an *AlgorithmError (which is
// dns.ErrKeyAlg: answered BADKEY).
type Keyring map[string]Key

// NewKeyring returns the keyring of keys.
func NewKeyring(keys ...Key) Keyring {
	r := make(Keyring, len(keys))
	for _, k := range keys {
		r[dns.CanonicalName(k.Name)] = k
	}
	return r
}

// AlgorithmError is a message signed with a known key under another
// algorithm than the key's.
type AlgorithmError struct {
	Key  string // the key's name
	Want string // the key's algorithm, as operators write it
	Got  string // the message's
}

func (e *AlgorithmError) Error() string {
	return fmt.Sprintf("TSIG key %s is %s, the message is signed with %s", e.Key, e.Want, e.Got)
}

// Unwrap makes errors.Is(err, dns.ErrKeyAlg) hold (BADKEY, RFC 8945
// §5.2.1).
func (e *AlgorithmError) Unwrap() error { return dns.ErrKeyAlg }

// AlgorithmName is the name operators write for a miekg/dns algorithm
// constant ("hmac-sha256" for dns.HmacSHA256).
func AlgorithmName(alg string) string {
	return strings.TrimSuffix(strings.ToLower(alg), ".")
}

// key returns the key t names, checked against t's algorithm.
func (r Keyring) key(t *dns.TSIG) (Key, error) {
	k, ok := r[dns.CanonicalName(t.Hdr.Name)]
	if !ok {
		return Key{}, dns.ErrSecret
	}
	if !strings.EqualFold(dns.CanonicalName(t.Algorithm), k.Algorithm) {
		return Key{}, &AlgorithmError{Key: k.Name, Want: AlgorithmName(k.Algorithm), Got: AlgorithmName(t.Algorithm)}
	}
	return k, nil
}

// Generate implements dns.TsigProvider.
func (r Keyring) Generate(msg []byte, t *dns.TSIG) ([]byte, error) {
	k, err := r.key(t)
	if err != nil {
		return nil, err
	}
	return mac(k, msg)
}

// Verify implements dns.TsigProvider.
func (r Keyring) Verify(msg []byte, t *dns.TSIG) error {
	k, err := r.key(t)
	if err != nil {
		return err
	}
	want, err := mac(k, msg)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil {
		return err
	}
	if !hmac.Equal(want, got) {
		return dns.ErrSig
	}
	return nil
}

// mac is the HMAC of msg under k.
func mac(k Key, msg []byte) ([]byte, error) {
	secret, err := base64.StdEncoding.DecodeString(k.Secret)
	if err != nil {
		return nil, err
	}
	var h func() hash.Hash
	switch k.Algorithm {
	case dns.HmacSHA1:
		h = sha1.New
	case dns.HmacSHA224:
		h = sha256.New224
	case dns.HmacSHA256:
		h = sha256.New
	case dns.HmacSHA384:
		h = sha512.New384
	case dns.HmacSHA512:
		h = sha512.New
	default:
		return nil, dns.ErrKeyAlg
	}
	m := hmac.New(h, secret)
	m.Write(msg)
	return m.Sum(nil), nil
}

var _ dns.TsigProvider = Keyring(nil)
