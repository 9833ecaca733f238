package dnssec

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// LoadKeys reads the key pairs at bases (each pair's path without .key or
// .private, as dnssec-keygen names them: K<zone>+<alg>+<tag>) with
// LoadKey, from fsys, or from the local disk when fsys is nil. The error
// joins one error per key that fails, each naming its file.
func LoadKeys(fsys fs.FS, bases []string) ([]*Key, error) {
	keys := make([]*Key, 0, len(bases))
	var errs []error
	for _, b := range bases {
		k, err := LoadKey(fsys, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			continue
		}
		keys = append(keys, k)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return keys, nil
}

// LoadKey reads the key pair base.key and base.private from fsys (the
// local disk when nil) and checks it: on the local disk the private file
// must not be readable by group or others (dnssec-keygen writes it 0600);
// the pair must be a zone key (flags 256 or 257, protocol 3) of a
// supported algorithm, the private file must name the public one's
// algorithm, and its key must be the public key's (a test signature the
// DNSKEY verifies).
func LoadKey(fsys fs.FS, base string) (*Key, error) {
	pub, err := readFile(fsys, base+".key")
	if err != nil {
		return nil, err
	}
	if fsys == nil {
		st, err := os.Stat(base + ".private")
		if err != nil {
			return nil, err
		}
		if m := st.Mode().Perm(); m&0o077 != 0 {
			return nil, fmt.Errorf("%s.private is readable by %s (mode %#o): make it readable by its owner only (chmod 600)", base, who(m), m)
		}
	}
	priv, err := readFile(fsys, base+".private")
	if err != nil {
		return nil, err
	}
	return ParseKey(base, pub, priv)
}

func who(m fs.FileMode) string {
	switch {
	case m&0o007 != 0 && m&0o070 != 0:
		return "group and others"
	case m&0o007 != 0:
		return "others"
	}
	return "its group"
}

func readFile(fsys fs.FS, p string) ([]byte, error) {
	if fsys == nil {
		return os.ReadFile(p)
	}
	return fs.ReadFile(fsys, p)
}

// checkPair checks what ParseKey's reading leaves unchecked: that the
// DNSKEY is a DNSSEC zone key, that the private file's Algorithm line is
// the DNSKEY's, and that the private key signs what the public key
// verifies (miekg/dns takes the public half from the DNSKEY without
// comparing).
func checkPair(file string, dk *dns.DNSKEY, priv []byte, s crypto.Signer) error {
	if dk.Flags&dns.ZONE == 0 || dk.Protocol != 3 {
		return fmt.Errorf("%s.key: flags %d protocol %d is not a DNSSEC zone key (flags 256 or 257, protocol 3)", file, dk.Flags, dk.Protocol)
	}
	if a, ok := privateAlgorithm(priv); ok && a != dk.Algorithm {
		return fmt.Errorf("%s.private: algorithm %d (%s), but %s.key has %d (%s): the files are not one pair",
			file, a, dns.AlgorithmToString[a], file, dk.Algorithm, dns.AlgorithmToString[dk.Algorithm])
	}
	rr := &dns.TXT{Hdr: dns.RR_Header{Name: dk.Hdr.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1}, Txt: []string{"steer key check"}}
	now := time.Now()
	sig := &dns.RRSIG{
		Hdr:         dns.RR_Header{Name: dk.Hdr.Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 1},
		Algorithm:   dk.Algorithm,
		Inception:   uint32(now.Add(-time.Hour).Unix()),
		Expiration:  uint32(now.Add(time.Hour).Unix()),
		KeyTag:      dk.KeyTag(),
		SignerName:  dk.Hdr.Name,
		OrigTtl:     1,
		TypeCovered: dns.TypeTXT,
	}
	if err := sig.Sign(s, []dns.RR{rr}); err != nil {
		return fmt.Errorf("%s.private: cannot sign with algorithm %d (%s): %v", file, dk.Algorithm, dns.AlgorithmToString[dk.Algorithm], err)
	}
	if err := sig.Verify(dk, []dns.RR{rr}); err != nil {
		return fmt.Errorf("%s.private does not hold the private key of %s.key (a test signature does not verify): the files are not one pair", file, file)
	}
	return nil
}

// privateAlgorithm returns the number of the "Algorithm:" line of a
// .private file.
func privateAlgorithm(priv []byte) (uint8, bool) {
	for _, l := range strings.Split(string(priv), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "algorithm") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 8)
		return uint8(n), err == nil
	}
	return 0, false
}

// ReadDNSKEY reads the public half of a key pair, base.key (or base
// itself when it ends in .key), from fsys (the local disk when nil): what
// steer dnssec ds needs, without the private key.
func ReadDNSKEY(fsys fs.FS, base string) (*dns.DNSKEY, error) {
	p := base
	if !strings.HasSuffix(p, ".key") {
		p += ".key"
	}
	b, err := readFile(fsys, p)
	if err != nil {
		return nil, err
	}
	rr, err := dns.NewRR(firstRecord(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	dk, ok := rr.(*dns.DNSKEY)
	if !ok {
		return nil, fmt.Errorf("%s: no DNSKEY record", p)
	}
	dk.Hdr.Name = dns.CanonicalName(dk.Hdr.Name)
	return dk, nil
}
