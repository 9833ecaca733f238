package dnssec

import (
	"bytes"
	"crypto"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// Key is one DNSSEC key pair: its DNSKEY record and the private key that
// signs with it.
type Key struct {
	DNSKEY *dns.DNSKEY
	Signer crypto.Signer
	// Tag is the DNSKEY's key tag (RFC 4034 Appendix B).
	Tag uint16
	// File is the key's base path (without .key or .private), for messages.
	File string
	// Withdrawn marks a SEP key the parent should no longer point at (a
	// KSK being rolled out): it still signs, but the apex's CDS and
	// CDNSKEY leave it out (RFC 7344), so they name only the keys whose
	// DS the parent should keep.
	Withdrawn bool
}

// SEP reports whether the key has the Secure Entry Point flag: a KSK, or
// a CSK.
func (k *Key) SEP() bool { return k.DNSKEY.Flags&dns.SEP != 0 }

// Supported algorithms: ECDSAP256SHA256 (the default), ED25519 and, for
// existing KSKs, RSASHA256.
var Algorithms = map[uint8]bool{
	dns.ECDSAP256SHA256: true,
	dns.ED25519:         true,
	dns.RSASHA256:       true,
}

// ParseKey reads a BIND dnssec-keygen pair from the contents of its
// K<zone>+<alg>+<tag>.key (pub) and .private (priv) files; file is the
// pair's base path, for messages. It refuses an unsupported algorithm, a
// DNSKEY that is not a zone key, and a private key that is not the public
// one's (LoadKey reads the files).
func ParseKey(file string, pub, priv []byte) (*Key, error) {
	rr, err := dns.NewRR(firstRecord(pub))
	if err != nil {
		return nil, fmt.Errorf("%s.key: %v", file, err)
	}
	dk, ok := rr.(*dns.DNSKEY)
	if !ok || rr == nil {
		return nil, fmt.Errorf("%s.key: no DNSKEY record", file)
	}
	dk.Hdr.Name = dns.CanonicalName(dk.Hdr.Name)
	if !Algorithms[dk.Algorithm] {
		name := dns.AlgorithmToString[dk.Algorithm]
		if name == "" {
			name = "unknown"
		}
		return nil, fmt.Errorf("%s.key: algorithm %d (%s) is not supported; use ECDSAP256SHA256 (13), ED25519 (15) or RSASHA256 (8)",
			file, dk.Algorithm, name)
	}
	pk, err := dk.ReadPrivateKey(bytes.NewReader(priv), file+".private")
	if err != nil {
		return nil, fmt.Errorf("%s.private: %v", file, privateError(err))
	}
	s, ok := pk.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s.private: not a signing key", file)
	}
	if err := checkPair(file, dk, priv, s); err != nil {
		return nil, err
	}
	return &Key{DNSKEY: dk, Signer: s, Tag: dk.KeyTag(), File: file}, nil
}

// firstRecord returns the first line of a .key file that is not a
// comment (dnssec-keygen writes comments above the record).
func firstRecord(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, ";") {
			return l
		}
	}
	return ""
}
