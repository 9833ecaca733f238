package dnssec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

// privateMaterial is the base64 of the key's private half as its
// .private file has it (the "PrivateKey:" line, or RSA's fields).
func privateMaterial(t *testing.T, priv []byte) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(string(priv), "\n") {
		k, v, ok := strings.Cut(l, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "privatekey", "privateexponent", "prime1", "prime2", "exponent1", "exponent2", "coefficient":
			if ok && strings.TrimSpace(v) != "" {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no private key material in\n%s", priv)
	}
	return out
}

// TestKeyNeverShowsPrivate: a Key printed (%v, %s, %+v, %#v), logged with
// slog (text and JSON) or marshalled to JSON shows no private key
// material, for each algorithm; a .private file whose key line lost its
// name fails to load with an error that names the line but not the key
// (miekg/dns quotes the token it stopped at).
func TestKeyNeverShowsPrivate(t *testing.T) {
	t.Parallel()
	for _, alg := range []uint8{dns.ECDSAP256SHA256, dns.ED25519, dns.RSASHA256} {
		k, err := dnssec.GenerateKey("example.com", alg, true)
		if err != nil {
			t.Fatal(err)
		}
		pub, priv := k.Files(time.Now())
		secrets := privateMaterial(t, priv)
		var b bytes.Buffer
		fmt.Fprintf(&b, "%v %s %+v %#v\n", k, k, k, k)
		slog.New(slog.NewTextHandler(&b, nil)).Info("key", "key", k)
		slog.New(slog.NewJSONHandler(&b, nil)).Info("key", "key", k, "keys", []*dnssec.Key{k})
		js, err := json.Marshal(map[string]any{"key": k})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(js)
		for _, s := range secrets {
			if strings.Contains(b.String(), s) {
				t.Errorf("alg %d: the private key shows in\n%s", alg, b.String())
			}
		}
		if !strings.Contains(b.String(), fmt.Sprintf("tag %d", k.Tag)) || !strings.Contains(string(js), k.DNSKEY.PublicKey) {
			t.Errorf("alg %d: the key's public half is not shown:\n%s", alg, b.String())
		}

		// The key line without its name: the error names the file
		// and line, never the key.
		lines := strings.Split(string(priv), "\n")
		at := 0
		for i, l := range lines {
			if k, v, ok := strings.Cut(l, ":"); ok && (strings.EqualFold(k, "PrivateKey") || strings.EqualFold(k, "PrivateExponent")) {
				lines[i], at = strings.TrimSpace(v), i+1
			}
		}
		fsys := fstest.MapFS{"K.key": {Data: pub}, "K.private": {Data: []byte(strings.Join(lines, "\n"))}}
		_, err = dnssec.LoadKey(fsys, "K")
		if err == nil {
			t.Fatalf("alg %d: a .private file without its key line's name loaded", alg)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("alg %d: the load error shows the private key: %v", alg, err)
			}
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("K.private: line %d is not a \"Name: value\" line", at)) {
			t.Errorf("alg %d: %v, want the file and line named", alg, err)
		}
	}
	if !dnssec.IsPrivateKeyFile([]byte("Private-key-format: v1.3\nAlgorithm: 13\n")) || dnssec.IsPrivateKeyFile([]byte("$ORIGIN example.com.\n")) {
		t.Error("IsPrivateKeyFile")
	}
}
