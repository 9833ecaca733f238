package zone

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestStampAndReadFile checks the one-open stamp and read against
// StampFile and os.ReadFile: the same bytes (small, empty and larger than
// the first read), the same stamp, the same errors.
func TestStampAndReadFile(t *testing.T) {
	dir := t.TempDir()
	later := time.Now().Add(time.Hour) // the files are older than racyWindow by then
	for _, size := range []int{0, 1, 511, 512, 513, 70000} {
		p := filepath.Join(dir, "z")
		want := bytes.Repeat([]byte("a\n"), size)[:size]
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		st, ok, data, err := StampAndReadFile(nil, p, later)
		wantSt, wantOK := StampFile(nil, p, later)
		if err != nil || !bytes.Equal(data, want) || st != wantSt || ok != wantOK || !ok {
			t.Errorf("%d bytes: read %d bytes, err %v, stamp %+v %v; StampFile %+v %v", size, len(data), err, st, ok, wantSt, wantOK)
		}
		if _, ok, _, _ := StampAndReadFile(nil, p, time.Now()); ok {
			t.Errorf("%d bytes: a file written just now has a trusted stamp", size)
		}
	}
	for _, p := range []string{filepath.Join(dir, "missing"), dir} {
		_, wantErr := os.ReadFile(p)
		_, ok, _, err := StampAndReadFile(nil, p, later)
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() || ok {
			t.Errorf("%s: err %v (stamp trusted: %v), os.ReadFile's %v", p, err, ok, wantErr)
		}
	}
}

// TestIsSubDomain checks the allocation-free subdomain test against
// dns.IsSubDomain on names with escapes, case and the root.
func TestIsSubDomain(t *testing.T) {
	names := []string{".", "com.", "example.com.", "www.example.com.", "a.www.example.com.",
		`www\.example.com.`, `www\\.example.com.`, `www\\\.example.com.`, `x\046example.com.`,
		"EXAMPLE.com.", "www.EXAMPLE.com.", "wwwexample.com.", "xample.com.", `\.com.`, `a.\.com.`, "ex.ample.com."}
	for _, p := range names {
		for _, c := range names {
			if got, want := isSubDomain(p, c), dns.IsSubDomain(p, c); got != want {
				t.Errorf("isSubDomain(%q, %q) = %v, dns.IsSubDomain %v", p, c, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { isSubDomain("example.com.", "www.example.com.") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
