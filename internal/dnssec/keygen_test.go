package dnssec_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnssec"
)

func newKey(t *testing.T, dir, zone string, alg uint8, sep bool) (*dnssec.Key, string) {
	t.Helper()
	k, err := dnssec.GenerateKey(zone, alg, sep)
	if err != nil {
		t.Fatal(err)
	}
	base, err := dnssec.WriteKey(dir, k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k, base
}

// TestKeygenRoundTrip writes a key of each algorithm and role and reads
// it back: file names and modes as BIND's, the same DNSKEY, a private key
// that signs what the DNSKEY verifies.
func TestKeygenRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, alg := range []uint8{dns.ECDSAP256SHA256, dns.ED25519, dns.RSASHA256} {
		for _, sep := range []bool{true, false} {
			k, base := newKey(t, dir, "Example.COM", alg, sep)
			if want := filepath.Join(dir, k.BaseName()); base != want || !strings.HasPrefix(k.BaseName(), "Kexample.com.+0") {
				t.Errorf("base %s, want %s", base, want)
			}
			for ext, mode := range map[string]fs.FileMode{".key": 0o644, ".private": 0o600} {
				st, err := os.Stat(base + ext)
				if err != nil {
					t.Fatal(err)
				}
				if ext == ".private" && st.Mode().Perm() != mode || ext == ".key" && st.Mode().Perm()&0o600 != 0o600 {
					t.Errorf("%s%s mode %v", base, ext, st.Mode())
				}
			}
			got, err := dnssec.LoadKey(nil, base)
			if err != nil {
				t.Fatal(err)
			}
			if got.DNSKEY.PublicKey != k.DNSKEY.PublicKey || got.DNSKEY.Flags != k.DNSKEY.Flags || got.Tag != k.Tag || got.SEP() != sep {
				t.Errorf("read back %v, wrote %v", got.DNSKEY, k.DNSKEY)
			}
			s, err := dnssec.NewSigner("example.com", []*dnssec.Key{got}, dnssec.Options{})
			if sep && err != nil || !sep && err == nil {
				t.Fatalf("signer of a key with SEP %v: %v", sep, err)
			}
			if s != nil {
				a := &dns.A{Hdr: dns.RR_Header{Name: "www.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{192, 0, 2, 1}}
				sigs, err := s.Sign([]dns.RR{a}, time.Now(), 0)
				if err != nil || len(sigs) != 1 {
					t.Fatalf("sign: %v %v", sigs, err)
				}
				if err := sigs[0].(*dns.RRSIG).Verify(k.DNSKEY, []dns.RR{a}); err != nil {
					t.Errorf("alg %d: %v", alg, err)
				}
			}
			// The same files again: never replaced.
			if _, err := dnssec.WriteKey(dir, k, time.Now()); !errors.Is(err, fs.ErrExist) {
				t.Errorf("second write: %v, want ErrExist", err)
			}
		}
	}
	if _, err := dnssec.GenerateKey("example.com", dns.RSASHA1, true); err == nil {
		t.Error("RSASHA1 key made")
	}
}

// TestLoadKeyProblems covers what LoadKey refuses that the configuration
// tests do not: a private file of another algorithm than its .key, a
// DNSKEY that is not a zone key; and LoadKeys joining one error a key.
func TestLoadKeyProblems(t *testing.T) {
	t.Parallel()
	ec, err := dnssec.GenerateKey("example.com", dns.ECDSAP256SHA256, true)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := dnssec.GenerateKey("example.com", dns.ED25519, true)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, ecPriv := ec.Files(time.Now())
	_, edPriv := ed.Files(time.Now())
	notZone := strings.Replace(string(ecPub), "DNSKEY 257", "DNSKEY 1", 1)
	fsys := fstest.MapFS{
		"ok.key": {Data: ecPub}, "ok.private": {Data: ecPriv},
		"alg.key": {Data: ecPub}, "alg.private": {Data: edPriv},
		"nz.key": {Data: []byte(notZone)}, "nz.private": {Data: ecPriv},
		"garbage.key": {Data: ecPub}, "garbage.private": {Data: []byte("not a key\n")},
	}
	if _, err := dnssec.LoadKey(fsys, "ok"); err != nil {
		t.Fatal(err)
	}
	for base, want := range map[string]string{
		"alg":     "alg.private: algorithm 15 (ED25519), but alg.key has 13 (ECDSAP256SHA256): the files are not one pair",
		"nz":      "nz.key: flags 1 protocol 3 is not a DNSSEC zone key",
		"garbage": "garbage.private:",
		"none":    "none.key",
	} {
		if _, err := dnssec.LoadKey(fsys, base); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", base, err, want)
		}
	}
	keys, err := dnssec.LoadKeys(fsys, []string{"ok", "alg", "nz"})
	if keys != nil || err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("LoadKeys: %v, %v", keys, err)
	}
	if keys, err := dnssec.LoadKeys(fsys, []string{"ok"}); err != nil || len(keys) != 1 {
		t.Errorf("LoadKeys ok: %v, %v", keys, err)
	}
	dk, err := dnssec.ReadDNSKEY(fsys, "ok.key")
	if err != nil || dk.PublicKey != ec.DNSKEY.PublicKey {
		t.Errorf("ReadDNSKEY: %v %v", dk, err)
	}
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	return p
}

func runTool(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKeygenBIND checks BIND reads the keys steer writes: dnssec-dsfromkey
// prints the DS steer prints, and dnssec-signzone signs a zone with them
// (a CSK; an ED25519 KSK and ZSK; an RSASHA256 KSK over an ECDSA ZSK)
// that dnssec-verify accepts. And steer reads the keys BIND's
// dnssec-keygen makes.
func TestKeygenBIND(t *testing.T) {
	t.Parallel()
	needTool(t, "dnssec-signzone")
	needTool(t, "dnssec-verify")
	needTool(t, "dnssec-dsfromkey")
	needTool(t, "dnssec-keygen")
	type spec struct {
		alg uint8
		sep bool
	}
	for name, set := range map[string][]spec{
		"csk":         {{dns.ECDSAP256SHA256, true}},
		"ed25519":     {{dns.ED25519, true}, {dns.ED25519, false}},
		"rsa-ksk-zsk": {{dns.RSASHA256, true}, {dns.ECDSAP256SHA256, false}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, s := range set {
				k, base := newKey(t, dir, "example.com", s.alg, s.sep)
				if s.sep {
					got := strings.TrimSpace(runTool(t, dir, "dnssec-dsfromkey", "-2", filepath.Base(base)+".key"))
					if want := dnssec.DSLine(k.DS()); got != want {
						t.Errorf("dnssec-dsfromkey: %q, steer: %q", got, want)
					}
				}
			}
			zone := "$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\nns1 A 192.0.2.1\nwww A 192.0.2.2\n"
			if err := os.WriteFile(filepath.Join(dir, "db"), []byte(zone), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-K", ".", "-o", "example.com", "-f", "db.signed", "-S"}
			vargs := []string{"-o", "example.com"}
			switch name {
			case "csk":
				// The CSK signs every RRset itself.
				args, vargs = append(args, "-z"), append(vargs, "-z")
			case "rsa-ksk-zsk":
				// BIND's verification wants every algorithm of the DNSKEY
				// set to sign every RRset (RFC 6840 §5.11 lets validators
				// accept one path; BIND's zone checks do not): sign
				// without it and check each key signed.
				args = append(args, "-P")
			}
			runTool(t, dir, "dnssec-signzone", append(args, "db")...)
			if name == "rsa-ksk-zsk" {
				data, err := os.ReadFile(filepath.Join(dir, "db.signed"))
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"RRSIG\tDNSKEY 8 2 ", "RRSIG\tA 13 3 "} {
					if !strings.Contains(strings.ReplaceAll(string(data), " ", "\t"), strings.ReplaceAll(want, " ", "\t")) {
						t.Errorf("signed zone has no %q:\n%s", want, data)
					}
				}
				return
			}
			out := runTool(t, dir, "dnssec-verify", append(vargs, "db.signed")...)
			if !strings.Contains(out, "Zone fully signed") {
				t.Errorf("dnssec-verify:\n%s", out)
			}
			for _, s := range set {
				if a := dns.AlgorithmToString[s.alg]; !strings.Contains(out, a) {
					t.Errorf("dnssec-verify does not name %s:\n%s", a, out)
				}
			}
		})
	}
	t.Run("bind-keys", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, a := range []string{"ECDSAP256SHA256", "ED25519"} {
			base := strings.TrimSpace(runTool(t, dir, "dnssec-keygen", "-q", "-a", a, "-f", "KSK", "-K", dir, "example.net"))
			k, err := dnssec.LoadKey(nil, filepath.Join(dir, base))
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			if !k.SEP() || k.BaseName() != base {
				t.Errorf("%s: SEP %v, name %s, BIND's %s", a, k.SEP(), k.BaseName(), base)
			}
		}
	})
}
