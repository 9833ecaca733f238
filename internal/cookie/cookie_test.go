package cookie

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func secret(t testing.TB, s string) Secret {
	t.Helper()
	sec, err := ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func client(t testing.TB, s string) [ClientLen]byte {
	t.Helper()
	return [ClientLen]byte(unhex(t, s))
}

// The worked examples of RFC 9018 Appendix A (secrets, client cookies,
// addresses and timestamps from the RFC): each query's cookie classified
// at its reply time, and each reply's cookie minted byte for byte.
func TestRFC9018AppendixA(t *testing.T) {
	const (
		secretA = "e5e973e5a6b2a43f48e7dc849e37bfcf"
		oldA4   = "dd3bdf9344b678b185a6f5cb60fca715"
		newA4   = "445536bcd2513298075a5d379663c962"
	)
	for _, tc := range []struct {
		name     string
		current  string
		previous string // "" for none
		ip       string
		query    string // COOKIE payload the client sent
		now      int64
		status   Status
		remint   bool
		reply    string // COOKIE payload the server sends
	}{
		{
			name: "A.1 learning a new server cookie", current: secretA,
			ip: "198.51.100.100", query: "2464c4abcf10c957", now: 1559731985,
			status: ClientOnly,
			reply:  "2464c4abcf10c957010000005cf79f111f8130c3eee29480",
		},
		{
			name: "A.2 the same client, 40 minutes later, gets a renewed cookie", current: secretA,
			ip: "198.51.100.100", query: "2464c4abcf10c957010000005cf79f111f8130c3eee29480", now: 1559734385,
			status: Valid, remint: true,
			reply: "2464c4abcf10c957010000005cf7a871d4a564a1442aca77",
		},
		{
			// The query's cookie was made 1h52m before the reply, past
			// MaxAge: at reply time it is out of the window.
			name: "A.3 another client, reserved bytes set, expired", current: secretA,
			ip: "203.0.113.203", query: "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5", now: 1559734700,
			status: Invalid,
			reply:  "fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e",
		},
		{
			name: "A.3 the same cookie when it was made: reserved bytes are hashed", current: secretA,
			ip: "203.0.113.203", query: "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5", now: 1559727985,
			status: Valid, remint: true, // reserved bytes set: answer with a clean one
		},
		{
			name: "A.4 IPv6, secret rolled over, verified by the previous", current: newA4, previous: oldA4,
			ip: "2001:db8:220:1:59de:d0f4:8769:82b8", query: "22681ab97d52c298010000005cf7c57926556bd0934c72f8", now: 1559741961,
			status: Valid, remint: true,
			reply: "22681ab97d52c298010000005cf7c609a6bb79d16625507a",
		},
		{
			name: "A.4 without the previous secret", current: newA4,
			ip: "2001:db8:220:1:59de:d0f4:8769:82b8", query: "22681ab97d52c298010000005cf7c57926556bd0934c72f8", now: 1559741961,
			status: Invalid,
			reply:  "22681ab97d52c298010000005cf7c609a6bb79d16625507a",
		},
		{
			name: "A.4 the old secret alone, when the cookie was made", current: oldA4,
			ip: "2001:db8:220:1:59de:d0f4:8769:82b8", query: "22681ab97d52c298010000005cf7c57926556bd0934c72f8", now: 1559741817,
			status: Valid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prev *Secret
			if tc.previous != "" {
				p := secret(t, tc.previous)
				prev = &p
			}
			j := NewJar(secret(t, tc.current), prev)
			ip := netip.MustParseAddr(tc.ip)
			now := time.Unix(tc.now, 0)
			q := unhex(t, tc.query)
			r := j.Check(q, ip, now)
			if r.Status != tc.status || r.Remint != tc.remint {
				t.Errorf("Check = %v remint %v, want %v remint %v", r.Status, r.Remint, tc.status, tc.remint)
			}
			if r.Client != [8]byte(q) {
				t.Errorf("client cookie %x, want %x", r.Client, q[:8])
			}
			if tc.reply == "" {
				return
			}
			want := unhex(t, tc.reply)
			if got := j.Mint(nil, r.Client, ip, now); !bytes.Equal(got, want) {
				t.Errorf("Mint = %x, want %x", got, want)
			}
			if got := j.Reply(nil, q, r, ip, now); !bytes.Equal(got, want) {
				t.Errorf("Reply = %x, want %x", got, want)
			}
			if r := j.Check(want, ip, now); r.Status != Valid || r.Remint {
				t.Errorf("the reply's own cookie checks as %v remint %v", r.Status, r.Remint)
			}
		})
	}
}

func TestWindowEdges(t *testing.T) {
	j := NewJar(secret(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"), nil)
	ip := netip.MustParseAddr("192.0.2.1")
	c := client(t, "0102030405060708")
	now := time.Unix(1764600000, 0)
	for _, tc := range []struct {
		offset time.Duration // timestamp relative to now
		status Status
		remint bool
	}{
		{0, Valid, false},
		{-1800 * time.Second, Valid, false},
		{-1801 * time.Second, Valid, true},
		{-3600 * time.Second, Valid, true},
		{-3601 * time.Second, Invalid, false},
		{300 * time.Second, Valid, false},
		{301 * time.Second, Invalid, false},
		{-48 * time.Hour, Invalid, false},
	} {
		opt := j.Mint(nil, c, ip, now.Add(tc.offset))
		r := j.Check(opt, ip, now)
		if r.Status != tc.status || r.Remint != tc.remint {
			t.Errorf("timestamp now%+v: %v remint %v, want %v remint %v", tc.offset, r.Status, r.Remint, tc.status, tc.remint)
		}
	}
}

// Timestamps compare as serial numbers, so a cookie minted just before
// the 32-bit second counter wraps (2106) still verifies just after.
func TestWindowAcrossTheWrap(t *testing.T) {
	j := Random()
	ip := netip.MustParseAddr("192.0.2.1")
	minted := time.Unix(1<<32-10, 0)
	opt := j.Mint(nil, [8]byte{1}, ip, minted)
	if r := j.Check(opt, ip, minted.Add(100*time.Second)); r.Status != Valid {
		t.Errorf("across the wrap: %v", r.Status)
	}
}

func TestPreviousSecret(t *testing.T) {
	oldS, newS := secret(t, "dd3bdf9344b678b185a6f5cb60fca715"), secret(t, "445536bcd2513298075a5d379663c962")
	ip := netip.MustParseAddr("2001:db8::1")
	c := client(t, "0102030405060708")
	now := time.Unix(1764600000, 0)

	old := NewJar(oldS, nil)
	opt := old.Mint(nil, c, ip, now)
	if r := old.Check(opt, ip, now); r.Status != Valid || r.Remint {
		t.Fatalf("own cookie: %v remint %v", r.Status, r.Remint)
	}
	// Rolled over, as a secret file with the new secret first holds them.
	rolled := NewJar(newS, &oldS)
	if !rolled.hasPrev || old.hasPrev {
		t.Errorf("previous secret: rolled %v, old %v", rolled.hasPrev, old.hasPrev)
	}
	r := rolled.Check(opt, ip, now)
	if r.Status != Valid || !r.Remint {
		t.Errorf("cookie of the previous secret: %v remint %v, want valid, remint", r.Status, r.Remint)
	}
	fresh := rolled.Reply(nil, opt, r, ip, now)
	if bytes.Equal(fresh, opt) {
		t.Error("Reply echoed a cookie only the previous secret verifies")
	}
	if !bytes.Equal(fresh, NewJar(newS, nil).Mint(nil, c, ip, now)) {
		t.Error("Reply did not mint with the current secret")
	}
	if r := rolled.Check(fresh, ip, now); r.Status != Valid || r.Remint {
		t.Errorf("fresh cookie: %v remint %v", r.Status, r.Remint)
	}
	if r := NewJar(newS, nil).Check(opt, ip, now); r.Status != Invalid {
		t.Errorf("without the previous secret: %v, want invalid", r.Status)
	}
	// Rolling over again drops the oldest secret.
	if r := NewJar(secret(t, "00112233445566778899aabbccddeeff"), &newS).Check(opt, ip, now); r.Status != Invalid {
		t.Errorf("two rotations later: %v, want invalid", r.Status)
	}
}

func TestInvalid(t *testing.T) {
	j := NewJar(secret(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"), nil)
	ip := netip.MustParseAddr("192.0.2.1")
	c := client(t, "0102030405060708")
	now := time.Unix(1764600000, 0)
	good := j.Mint(nil, c, ip, now)
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	for name, opt := range map[string][]byte{
		"hash bit flipped":     mutate(func(b []byte) { b[23] ^= 1 }),
		"client cookie change": mutate(func(b []byte) { b[0] ^= 1 }),
		"timestamp changed":    mutate(func(b []byte) { b[15]-- }),
		"reserved changed":     mutate(func(b []byte) { b[9] = 1 }),
		"version 2":            mutate(func(b []byte) { b[8] = 2 }),
		"version 0":            mutate(func(b []byte) { b[8] = 0 }),
		"server cookie of 8":   good[:16],
		"server cookie of 15":  good[:23],
		"server cookie of 32":  append(bytes.Clone(good), make([]byte, 16)...),
		"other secret":         NewJar(secret(t, "00112233445566778899aabbccddeeff"), nil).Mint(nil, c, ip, now),
	} {
		r := j.Check(opt, ip, now)
		if r.Status != Invalid || r.Remint || r.Client != [8]byte(opt) {
			t.Errorf("%s: %v remint %v client %x", name, r.Status, r.Remint, r.Client)
		}
		if want := j.Mint(nil, [8]byte(opt), ip, now); !bytes.Equal(j.Reply(nil, opt, r, ip, now), want) {
			t.Errorf("%s: Reply is not a fresh %x", name, want)
		}
	}
	if r := j.Check(good, netip.MustParseAddr("192.0.2.2"), now); r.Status != Invalid {
		t.Errorf("another client address: %v", r.Status)
	}
	if r := j.Check(good, netip.MustParseAddr("::ffff:192.0.2.1"), now); r.Status != Valid {
		t.Errorf("the same address IPv4-mapped: %v", r.Status)
	}
}

func TestMalformed(t *testing.T) {
	j := Random()
	ip := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	for _, n := range []int{0, 1, 7, 9, 15, 41, 64} {
		opt := make([]byte, n)
		if _, ok := ParseOption(opt); ok {
			t.Errorf("ParseOption of %d bytes: ok", n)
		}
		if r := j.Check(opt, ip, now); r.Status != Malformed {
			t.Errorf("%d bytes (client %d, server %d): %v, want malformed", n, min(n, 8), max(n-8, 0), r.Status)
		}
		if got := j.Reply(nil, opt, Result{Status: Malformed}, ip, now); len(got) != 0 {
			t.Errorf("Reply to a malformed option: %x", got)
		}
	}
	for _, n := range []int{8, 16, 24, 40} {
		o, ok := ParseOption(make([]byte, n))
		if !ok || (n == 8) != (o.Server == nil) || len(o.Server) != n-8 {
			t.Errorf("ParseOption of %d bytes: ok %v, server %d bytes", n, ok, len(o.Server))
		}
	}
	c := client(t, "0102030405060708")
	r := j.Check(c[:], ip, now)
	if r.Status != ClientOnly || r.Client != c {
		t.Errorf("client cookie only: %v %x", r.Status, r.Client)
	}
}

// BIND, NSD and Knot hash a v4 client's address as 4 bytes even when the
// socket reports it IPv4-mapped; Mint must too.
func TestIPv4MappedHashesAsIPv4(t *testing.T) {
	j := NewJar(secret(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"), nil)
	c := client(t, "2464c4abcf10c957")
	now := time.Unix(1559731985, 0)
	want := unhex(t, "2464c4abcf10c957010000005cf79f111f8130c3eee29480") // RFC 9018 A.1
	for _, ip := range []string{"198.51.100.100", "::ffff:198.51.100.100"} {
		if got := j.Mint(nil, c, netip.MustParseAddr(ip), now); !bytes.Equal(got, want) {
			t.Errorf("%s: %x, want %x", ip, got, want)
		}
	}
	if got := j.Mint(nil, c, netip.MustParseAddr("::c633:6464"), now); bytes.Equal(got, want) {
		t.Error("an IPv4-compatible (not mapped) IPv6 address hashed as IPv4")
	}
}

func TestMintAppends(t *testing.T) {
	j := Random()
	dst := []byte("prefix")
	got := j.Mint(dst, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, netip.MustParseAddr("192.0.2.1"), time.Unix(0x01020304, 0))
	if len(got) != len(dst)+MintLen || string(got[:6]) != "prefix" {
		t.Fatalf("Mint appended %d bytes to %q", len(got)-len(dst), got[:6])
	}
	srv := got[6+8:]
	if srv[0] != 1 || srv[1]|srv[2]|srv[3] != 0 || binary.BigEndian.Uint32(srv[4:8]) != 0x01020304 {
		t.Errorf("server cookie header %x", srv[:8])
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{Absent: "absent", ClientOnly: "client_only", Valid: "valid", Invalid: "invalid", Malformed: "malformed", 99: "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}

func TestZeroAllocations(t *testing.T) {
	j := NewJar(secret(t, "e5e973e5a6b2a43f48e7dc849e37bfcf"), &Secret{1})
	v4, v6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	c := client(t, "0102030405060708")
	now := time.Now()
	buf := make([]byte, 0, 64)
	opt4 := j.Mint(nil, c, v4, now)
	opt6 := NewJar(Secret{1}, nil).Mint(nil, c, v6, now) // verified by the previous secret
	var sink Result
	for name, f := range map[string]func(){
		"Mint v4":        func() { buf = j.Mint(buf[:0], c, v4, now) },
		"Mint v6":        func() { buf = j.Mint(buf[:0], c, v6, now) },
		"Check v4":       func() { sink = j.Check(opt4, v4, now) },
		"Check previous": func() { sink = j.Check(opt6, v6, now) },
		"Check invalid":  func() { sink = j.Check(opt4, v6, now) },
		"Reply":          func() { buf = j.Reply(buf[:0], opt4, sink, v4, now) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per run", name, n)
		}
	}
	_ = sink
}

func BenchmarkMint(b *testing.B) {
	j := Random()
	ip := netip.MustParseAddr("192.0.2.1")
	c := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	now := time.Now()
	buf := make([]byte, 0, MintLen)
	b.ReportAllocs()
	for b.Loop() {
		buf = j.Mint(buf[:0], c, ip, now)
	}
}

func BenchmarkCheck(b *testing.B) {
	prev := Secret{8}
	j := NewJar(Secret{7}, &prev)
	ip := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	opt := j.Mint(nil, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, ip, now)
	b.ReportAllocs()
	for b.Loop() {
		if j.Check(opt, ip, now).Status != Valid {
			b.Fatal("not valid")
		}
	}
}

func TestParseSecretFile(t *testing.T) {
	const a, b = "e5e973e5a6b2a43f48e7dc849e37bfcf", "445536BCD2513298075A5D379663C962"
	ip := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	byA := NewJar(secret(t, a), nil).Mint(nil, [8]byte{1}, ip, now)
	byB := NewJar(secret(t, b), nil).Mint(nil, [8]byte{1}, ip, now)

	j, err := Parse([]byte("# cookie secrets\n\n  "+a+"  # current\n"+b+"\n# end\n"), "secrets")
	if err != nil {
		t.Fatal(err)
	}
	if !j.hasPrev {
		t.Error("two secrets, no previous")
	}
	if r := j.Check(byA, ip, now); r.Status != Valid || r.Remint {
		t.Errorf("first line: %v remint %v, want it current", r.Status, r.Remint)
	}
	if r := j.Check(byB, ip, now); r.Status != Valid || !r.Remint {
		t.Errorf("second line: %v remint %v, want it previous", r.Status, r.Remint)
	}
	if got := j.Mint(nil, [8]byte{1}, ip, now); !bytes.Equal(got, byA) {
		t.Error("does not mint with the first line")
	}

	j, err = Parse([]byte(b+"\r\n"), "one")
	if err != nil || j.hasPrev {
		t.Fatalf("one secret with CRLF: %v, previous %v", err, j != nil && j.hasPrev)
	}
	if r := j.Check(byB, ip, now); r.Status != Valid {
		t.Errorf("one secret: %v", r.Status)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "cookie.secret")
	if err := os.WriteFile(path, []byte(a+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if j, err := Load(path); err != nil || j.Check(byA, ip, now).Status != Valid {
		t.Errorf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestParseSecretFileErrors(t *testing.T) {
	const a = "e5e973e5a6b2a43f48e7dc849e37bfcf"
	for _, tc := range []struct{ text, want string }{
		{"", "f: no secret"},
		{"# only a comment\n\n", "f: no secret"},
		{a[:30] + "\n", "f:1: secret is 30 characters, want 32 hex digits"},
		{"\n" + a + "00\n", "f:2: secret is 34 characters, want 32 hex digits"},
		{a[:31] + "g\n", `f:1: secret is not hex: 'g' at column 32`},
		{a[:10] + " " + a[11:] + "\n", `f:1: secret is not hex: ' ' at column 11`},
		{"0x" + a[2:] + "\n", `f:1: secret is not hex: 'x' at column 2`},
		{a + "\n" + a + "\n# c\n" + a + "\n", "f:4: more than two secrets"},
	} {
		j, err := Parse([]byte(tc.text), "f")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
		if j != nil {
			t.Errorf("%q: a jar with the error", tc.text)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.secret")
	if err := os.WriteFile(path, []byte("# x\nnope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: secret is 4 characters") {
		t.Errorf("Load: %v, want it to name %s:2", err, path)
	}
}

func TestRandom(t *testing.T) {
	a, b := Random(), Random()
	ip := netip.MustParseAddr("192.0.2.1")
	now := time.Now()
	opt := a.Mint(nil, [8]byte{1}, ip, now)
	if a.Check(opt, ip, now).Status != Valid || b.Check(opt, ip, now).Status != Invalid {
		t.Error("two random jars agree, or one rejects its own cookie")
	}
	if a.hasPrev {
		t.Error("a random jar has a previous secret")
	}
}
