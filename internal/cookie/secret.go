package cookie

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// Secret is a 128-bit server secret (RFC 9018 §4.4 keys SipHash-2-4 with
// it). Every server behind one address must share it for their cookies to
// verify at each other.
type Secret [16]byte

// ParseSecret reads a secret written as 32 hex digits (either case), the
// form BIND's cookie-secret, NSD's cookie-secret and Knot's secret use.
func ParseSecret(s string) (Secret, error) {
	var sec Secret
	if len(s) != 2*len(sec) {
		return sec, fmt.Errorf("secret is %d characters, want %d hex digits", len(s), 2*len(sec))
	}
	if _, err := hex.Decode(sec[:], []byte(s)); err != nil {
		return Secret{}, errors.New("secret is not hex: " + hexProblem(s))
	}
	return sec, nil
}

// hexProblem names the first character of s that is not a hex digit.
func hexProblem(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return fmt.Sprintf("%q at column %d", c, i+1)
		}
	}
	return "bad digit"
}

// Random returns a jar with a fresh random current secret (crypto/rand)
// and no previous one: for a node with no configured secret, whose cookies
// then verify only at itself.
func Random() *Jar {
	var s Secret
	rand.Read(s[:]) // never fails (crypto/rand since Go 1.24)
	return NewJar(s, nil)
}

// Load reads a secret file (see Parse).
func Load(path string) (*Jar, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse reads the text of a secret file named name: one or two lines of
// 32 hex digits, the first the current secret (mints and verifies), the
// second the previous one (verifies only, during a rollover). Blank lines
// and comments from '#' to the end of a line are ignored. Errors read
// "name:line: reason".
func Parse(text []byte, name string) (*Jar, error) {
	var secrets []Secret
	for n, line := range bytes.Split(text, []byte("\n")) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(secrets) == 2 {
			return nil, fmt.Errorf("%s:%d: more than two secrets (the first mints, the second only verifies)", name, n+1)
		}
		s, err := ParseSecret(string(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n+1, err)
		}
		secrets = append(secrets, s)
	}
	switch len(secrets) {
	case 0:
		return nil, fmt.Errorf("%s: no secret (want a line of 32 hex digits)", name)
	case 1:
		return NewJar(secrets[0], nil), nil
	}
	if secrets[0] == secrets[1] {
		return NewJar(secrets[0], nil), nil
	}
	return NewJar(secrets[0], &secrets[1]), nil
}
