package dnssec

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// AlgorithmNames maps the names steer dnssec keygen accepts (lower case,
// as BIND's dnssec-keygen -a spells them) to the algorithms.
var AlgorithmNames = map[string]uint8{
	"ecdsap256sha256": dns.ECDSAP256SHA256,
	"ed25519":         dns.ED25519,
	"rsasha256":       dns.RSASHA256,
}

// keyBits is the size GenerateKey makes a key of each algorithm.
var keyBits = map[uint8]int{
	dns.ECDSAP256SHA256: 256,
	dns.ED25519:         256,
	dns.RSASHA256:       2048,
}

// GenerateKey makes a new key pair for zone: of algorithm alg (one of
// Algorithms; RSA keys have 2048 bits), with the SEP flag (a KSK or a CSK,
// flags 257) when sep, else a ZSK (flags 256).
func GenerateKey(zone string, alg uint8, sep bool) (*Key, error) {
	if _, ok := dns.IsDomainName(zone); !ok {
		return nil, fmt.Errorf("%q is not a domain name", zone)
	}
	bits, ok := keyBits[alg]
	if !ok {
		return nil, fmt.Errorf("algorithm %d is not supported; use ECDSAP256SHA256 (13), ED25519 (15) or RSASHA256 (8)", alg)
	}
	dk := &dns.DNSKEY{
		Hdr:       dns.RR_Header{Name: dns.CanonicalName(zone), Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags:     dns.ZONE,
		Protocol:  3,
		Algorithm: alg,
	}
	if sep {
		dk.Flags |= dns.SEP
	}
	pk, err := dk.Generate(bits)
	if err != nil {
		return nil, err
	}
	k := &Key{DNSKEY: dk, Tag: dk.KeyTag()}
	if k.Signer, ok = pk.(crypto.Signer); !ok {
		return nil, errors.New("generated key cannot sign")
	}
	k.File = k.BaseName()
	return k, nil
}

// BaseName is the name BIND gives the key's files, less .key or
// .private: K<zone>+<alg>+<tag>, the zone with its final dot (K.+... for
// the root).
func (k *Key) BaseName() string {
	return fmt.Sprintf("K%s+%03d+%05d", k.DNSKEY.Hdr.Name, k.DNSKEY.Algorithm, k.Tag)
}

// Files returns the contents of the key's two files in the form BIND's
// dnssec-keygen writes them, with created, publish and activate times
// now: the .key file (comments, then the DNSKEY record without a TTL) and
// the .private file ("Private-key-format: v1.3").
func (k *Key) Files(now time.Time) (pub, priv []byte) {
	ts := now.UTC().Format("20060102150405")
	human := now.UTC().Format("Mon Jan _2 15:04:05 2006")
	role := "zone-signing"
	if k.SEP() {
		role = "key-signing"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "; This is a %s key, keyid %d, for %s\n", role, k.Tag, k.DNSKEY.Hdr.Name)
	for _, t := range []string{"Created", "Publish", "Activate"} {
		fmt.Fprintf(&b, "; %s: %s (%s)\n", t, ts, human)
	}
	fmt.Fprintf(&b, "%s IN DNSKEY %d %d %d %s\n", k.DNSKEY.Hdr.Name, k.DNSKEY.Flags, k.DNSKEY.Protocol, k.DNSKEY.Algorithm, k.DNSKEY.PublicKey)
	pub = []byte(b.String())

	b.Reset()
	b.WriteString(k.DNSKEY.PrivateKeyString(k.Signer))
	for _, t := range []string{"Created", "Publish", "Activate"} {
		fmt.Fprintf(&b, "%s: %s\n", t, ts)
	}
	return pub, []byte(b.String())
}

// WriteKey writes the key's files into dir as BaseName().key (mode 0644)
// and BaseName().private (0600), and returns their base path. It never
// replaces a file: when either exists, it fails with an error that
// errors.Is fs.ErrExist.
func WriteKey(dir string, k *Key, now time.Time) (string, error) {
	// A keys directory that does not exist yet is made, for its owner
	// alone: it holds private keys.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	base := filepath.Join(dir, k.BaseName())
	pub, priv := k.Files(now)
	// The private half first, created exclusively and readable by its
	// owner alone from the start; on any failure nothing is left.
	if err := writeNew(base+".private", priv, 0o600); err != nil {
		return "", err
	}
	if err := writeNew(base+".key", pub, 0o644); err != nil {
		os.Remove(base + ".private")
		return "", err
	}
	return base, nil
}

func writeNew(p string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err2 := f.Sync(); err == nil {
		err = err2
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Chmod(p, mode) // the umask may have taken bits off 0644; never adds to 0600
	}
	if err != nil {
		os.Remove(p)
	}
	return err
}

// DS returns the DS record (SHA-256, digest type 2) the parent publishes
// for the key; only a SEP key (KSK or CSK) should have one.
func (k *Key) DS() *dns.DS { return DSOf(k.DNSKEY) }

// DSOf returns the SHA-256 DS record of a DNSKEY.
func DSOf(dk *dns.DNSKEY) *dns.DS {
	ds := dk.ToDS(dns.SHA256)
	if ds != nil {
		ds.Hdr.Ttl = 0
	}
	return ds
}

// DSLine formats a DS as BIND's dnssec-dsfromkey prints it:
// "example.com. IN DS 4565 13 2 HEX".
func DSLine(ds *dns.DS) string {
	return fmt.Sprintf("%s IN DS %d %d %d %s", ds.Hdr.Name, ds.KeyTag, ds.Algorithm, ds.DigestType, strings.ToUpper(ds.Digest))
}
