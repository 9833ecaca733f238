package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// TestProfileCoversQueryPath: default.pgo, the profile every go build of
// steer optimizes with (the test suite itself builds with -pgo=off, so no
// other test reads it), is a whole gzip-compressed profile that names
// the query path's hot functions. A profile that no longer names them
// (renamed or moved) optimizes nothing there: bench/pgo.sh writes a new
// one.
func TestProfileCoversQueryPath(t *testing.T) {
	raw, err := os.ReadFile("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("default.pgo is not a gzip-compressed profile: %v", err)
	}
	pb, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("default.pgo is cut short: %v", err)
	}
	for _, fn := range []string{
		"github.com/steer-dns/steer/internal/dnsserver.(*Handler).fast",
		"github.com/steer-dns/steer/internal/dnsserver.parseFast",
		"github.com/steer-dns/steer/internal/policy.(*Live).DecideInto",
		"github.com/steer-dns/steer/internal/policy.(*Record).AppendWire",
		"github.com/steer-dns/steer/internal/policy.(*trie).lookup",
	} {
		if !bytes.Contains(pb, []byte(fn)) {
			t.Errorf("default.pgo does not name %s: run bench/pgo.sh", fn)
		}
	}
}
