package dnssec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"

	"github.com/miekg/dns"
)

// A Key holds a private key: it never prints, logs or marshals it. String
// (fmt's %v and %s), GoString (%#v), LogValue (slog) and MarshalJSON show
// the public half only: the file, the DNSKEY's owner, flags, algorithm and
// tag. Whoever holds the private key signs for the zone, so a log line or
// an API answer that showed the Key would give it away.

// String is the key's file, owner, role, algorithm and tag.
func (k *Key) String() string {
	if k == nil || k.DNSKEY == nil {
		return "<nil key>"
	}
	role := "ZSK"
	if k.SEP() {
		role = "KSK/CSK"
	}
	return fmt.Sprintf("%s (%s %s %s tag %d)", k.File, k.DNSKEY.Hdr.Name, role, dns.AlgorithmToString[k.DNSKEY.Algorithm], k.Tag)
}

// GoString is String, so %#v hides the private key too.
func (k *Key) GoString() string { return k.String() }

// LogValue is String, so slog hides the private key.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON gives the public half only.
func (k *Key) MarshalJSON() ([]byte, error) {
	if k == nil || k.DNSKEY == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		File      string `json:"file"`
		Tag       uint16 `json:"tag"`
		Flags     uint16 `json:"flags"`
		Algorithm uint8  `json:"algorithm"`
		PublicKey string `json:"public_key"`
	}{k.File, k.Tag, k.DNSKEY.Flags, k.DNSKEY.Algorithm, k.DNSKEY.PublicKey})
}

// IsPrivateKeyFile reports whether data is in BIND's private key format
// ("Private-key-format: v1.x" first): a file whose contents sign for a
// zone, wherever it is found.
func IsPrivateKeyFile(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("Private-key-format:"))
}

// parseErrLine is where miekg/dns's ParseError says it stopped.
var parseErrLine = regexp.MustCompile(`at line: (\d+):\d+$`)

// privateError is err, from reading a .private file, without the text it
// quotes: miekg/dns's ParseError quotes the token it stopped at, which on
// a line that lost its "PrivateKey:" is the private key itself, and the
// message goes to steer check's output, the node's log and fleet status.
func privateError(err error) error {
	var pe *dns.ParseError
	if !errors.As(err, &pe) {
		return err // the others name no contents ("dns: bad private key", base64's offset)
	}
	if m := parseErrLine.FindStringSubmatch(pe.Error()); m != nil {
		if n, aerr := strconv.Atoi(m[1]); aerr == nil {
			return fmt.Errorf("line %d is not a \"Name: value\" line of Private-key-format (the line is not shown: it may hold the key)", n)
		}
	}
	return errors.New("not in Private-key-format (the line at fault is not shown: it may hold the key)")
}
