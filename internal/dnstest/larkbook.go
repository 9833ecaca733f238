package dnstest

import (
	"os"
	"path/filepath"
	"strings"
)

// LarkbookRecord returns the steered record of the demo configuration
// (internal/config/demo/steer.yaml), verbatim: every entry under its
// "records:" key, each line indented as there. Tests build their
// configurations around it, so the record they test is the one the README
// and `steer serve` show, with no copy to drift.
func LarkbookRecord() string {
	path := RepoFile("internal/config/demo/steer.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		panic("dnstest: " + err.Error())
	}
	_, rec, ok := strings.Cut(string(b), "\nrecords:\n")
	if !ok {
		panic("dnstest: no records: key in " + path)
	}
	return rec
}

// RepoFile returns the path of rel, a slash-separated path from the root of
// steer's repository, found from the working directory up (a test runs in
// its package's directory). Not from the source file's own path: a build
// with -trimpath, as the test suite's and the release's are, records
// module paths, not directories. It panics outside the repository.
func RepoFile(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		panic("dnstest: " + err.Error())
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/steer-dns/steer\n") {
			return filepath.Join(dir, filepath.FromSlash(rel))
		}
		up := filepath.Dir(dir)
		if up == dir {
			panic("dnstest: not inside steer's repository (no go.mod of github.com/steer-dns/steer above the working directory)")
		}
		dir = up
	}
}
