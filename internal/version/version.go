// Package version says which build of steer is running: the version, the
// commit and its time, whether the tree had uncommitted changes, and the Go
// version. They come from the Go build info (runtime/debug.ReadBuildInfo:
// the module version for "go install ...@vX.Y.Z", the vcs.* settings for a
// build in a git checkout), and the release build overrides them with
// -ldflags, which wins:
//
//	go build -trimpath -ldflags "-X github.com/steer-dns/steer/internal/version.Version=v0.1.0 \
//	  -X github.com/steer-dns/steer/internal/version.Commit=$(git rev-parse HEAD) \
//	  -X github.com/steer-dns/steer/internal/version.Date=2026-12-01T12:00:00Z" ./cmd/steer
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set with -ldflags -X; empty means "from the build info".
var (
	// Version is the release, "v0.1.0" (a leading v is added if missing).
	Version string
	// Commit is the full commit hash.
	Commit string
	// Date is the build (or commit) time, RFC 3339.
	Date string
)

// Info describes the running build; it is also the "build" object of
// /v1/status.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

var (
	once sync.Once
	info Info
)

// Get returns the running build's Info (computed once).
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = compute(bi, Version, Commit, Date)
	})
	return info
}

// compute merges the build info with the -ldflags overrides.
func compute(bi *debug.BuildInfo, ver, commit, date string) Info {
	in := Info{Version: "dev", GoVersion: runtime.Version()}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			in.Version = v
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.Date = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if ver != "" {
		if !strings.HasPrefix(ver, "v") {
			ver = "v" + ver
		}
		in.Version = ver
	}
	if commit != "" {
		in.Commit = commit
		in.Modified = false // a release build says what it was built from
	}
	if date != "" {
		in.Date = date
	}
	return in
}

// Short is the version with the abbreviated commit: "v0.1.0 (3a146a8c1b2f)",
// "dev (3a146a8c1b2f, modified)".
func (in Info) Short() string {
	s := in.Version
	var extra []string
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		extra = append(extra, c)
	}
	if in.Modified {
		extra = append(extra, "modified")
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

// String is what "steer version" prints: one field per line.
func (in Info) String() string {
	or := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	commit := or(in.Commit)
	if in.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("steer %s\ncommit:     %s\nbuild date: %s\ngo:         %s %s/%s\n",
		in.Version, commit, or(in.Date), in.GoVersion, runtime.GOOS, runtime.GOARCH)
}
