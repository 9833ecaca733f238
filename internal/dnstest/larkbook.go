package dnstest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// LarkbookRecord returns the steered record of the demo configuration
// (internal/config/demo/steer.yaml), verbatim: every entry under its
// "records:" key, each line indented as there. Tests build their
// configurations around it, so the record they test is the one the README
// and `steer serve` show, with no copy to drift.
func LarkbookRecord() string {
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		panic("dnstest: no caller information to find the demo configuration")
	}
	path := filepath.Join(filepath.Dir(here), "..", "config", "demo", "steer.yaml")
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
