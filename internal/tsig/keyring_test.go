package tsig

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestKeyringBindsAlgorithm: a key defined as hmac-sha256 verifies a
// message signed with it, and not one MACed with the same secret under
// hmac-sha512 or hmac-sha1, which miekg/dns's secret map accepts; the
// error names the key and both algorithms and is BADKEY's.
func TestKeyringBindsAlgorithm(t *testing.T) {
	k, err := NewKey("xfr-key", "hmac-sha256", secret256)
	if err != nil {
		t.Fatal(err)
	}
	ring := NewKeyring(k)
	signed := func(alg string) []byte {
		m := new(dns.Msg)
		m.SetQuestion("example.com.", dns.TypeSOA)
		m.SetTsig("xfr-key.", alg, 300, time.Now().Unix())
		b, _, err := dns.TsigGenerate(m, secret256, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := dns.TsigVerifyWithProvider(signed(dns.HmacSHA256), ring, "", false); err != nil {
		t.Fatalf("its own algorithm: %v", err)
	}
	for _, alg := range []string{dns.HmacSHA512, dns.HmacSHA1} {
		b := signed(alg)
		if err := dns.TsigVerify(append([]byte(nil), b...), secret256, "", false); err != nil {
			t.Fatalf("%s: miekg's secret map should take it (the hole this closes): %v", alg, err)
		}
		err := dns.TsigVerifyWithProvider(b, ring, "", false)
		var ae *AlgorithmError
		if !errors.As(err, &ae) || !errors.Is(err, dns.ErrKeyAlg) {
			t.Fatalf("%s: %v, want an AlgorithmError", alg, err)
		}
		want := "TSIG key xfr-key. is hmac-sha256, the message is signed with " + AlgorithmName(alg)
		if err.Error() != want {
			t.Errorf("%s: %q, want %q", alg, err, want)
		}
	}
	// Signing follows the same rule: the key's algorithm or nothing.
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeSOA)
	m.SetTsig("xfr-key.", dns.HmacSHA1, 300, time.Now().Unix())
	if _, _, err := dns.TsigGenerateWithProvider(m, ring, "", false); !errors.Is(err, dns.ErrKeyAlg) {
		t.Errorf("signing under another algorithm: %v", err)
	}
	m.Extra = nil
	m.SetTsig("other.", dns.HmacSHA256, 300, time.Now().Unix())
	if _, _, err := dns.TsigGenerateWithProvider(m, ring, "", false); !errors.Is(err, dns.ErrSecret) {
		t.Errorf("signing with an unknown key: %v", err)
	}
	// BADKEY for the reply.
	req := new(dns.Msg)
	if err := req.Unpack(signed(dns.HmacSHA512)); err != nil {
		t.Fatal(err)
	}
	if r := ErrorReply(req, &AlgorithmError{}); r.Rcode != dns.RcodeNotAuth || r.IsTsig().Error != dns.RcodeBadKey {
		t.Errorf("error reply %s TSIG error %d", dns.RcodeToString[r.Rcode], r.IsTsig().Error)
	}
	if !strings.Contains(AlgorithmName(dns.HmacSHA384), "hmac-sha384") || strings.HasSuffix(AlgorithmName(dns.HmacSHA384), ".") {
		t.Errorf("AlgorithmName %q", AlgorithmName(dns.HmacSHA384))
	}
}
