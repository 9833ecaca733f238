package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestCompute(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/steer-dns/steer", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3a146a8c1b2f3a146a8c1b2f3a146a8c1b2f3a14"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	in := compute(bi, "", "", "")
	want := Info{Version: "dev", Commit: "3a146a8c1b2f3a146a8c1b2f3a146a8c1b2f3a14", Date: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8"}
	if in != want {
		t.Fatalf("from build info: %+v, want %+v", in, want)
	}
	if s := in.Short(); s != "dev (3a146a8c1b2f, modified)" {
		t.Errorf("Short = %q", s)
	}

	// go install ...@v0.1.0: the module version.
	bi.Main.Version = "v0.1.0"
	if in := compute(bi, "", "", ""); in.Version != "v0.1.0" {
		t.Errorf("module version: %q", in.Version)
	}

	// The package build's -ldflags win.
	in = compute(bi, "0.2.0", "abcdef0123456789", "2026-12-02T00:00:00Z")
	want = Info{Version: "v0.2.0", Commit: "abcdef0123456789", Date: "2026-12-02T00:00:00Z", GoVersion: "go1.26.8"}
	if in != want {
		t.Fatalf("with ldflags: %+v, want %+v", in, want)
	}
	if s := in.String(); !strings.Contains(s, "steer v0.2.0\n") || !strings.Contains(s, "commit:     abcdef0123456789\n") ||
		!strings.Contains(s, "build date: 2026-12-02T00:00:00Z\n") || !strings.Contains(s, "go:         go1.26.8 ") {
		t.Errorf("String:\n%s", s)
	}

	// No build info at all (a stripped test binary).
	if in := compute(nil, "", "", ""); in.Version != "dev" || in.GoVersion == "" || in.Commit != "" {
		t.Errorf("no build info: %+v", in)
	}
	if s := compute(nil, "", "", "").String(); !strings.Contains(s, "commit:     unknown") {
		t.Errorf("String without commit:\n%s", s)
	}
}

func TestGet(t *testing.T) {
	if in := Get(); in.Version == "" || in.GoVersion == "" {
		t.Fatalf("Get: %+v", in)
	}
}
