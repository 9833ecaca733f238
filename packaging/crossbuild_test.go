package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCrossBuild compiles every package for systems this machine is not:
// 32-bit Linux (int is 32 bits: constants past 2 GiB, the stat times'
// int32 fields), arm64 Linux (the assembly, the other raw UDP build),
// FreeBSD and macOS (no Linux-only syscalls, stat and rlimit fields, or
// process attributes). The 64-bit ones are vetted, tests included; the
// 32-bit one only compiled without linking (go list -export), as its tests
// use mmdbwriter, which does not build where int is 32 bits. About 5 s on
// a warm build cache; on a cold one each system compiles the standard
// library and every dependency for itself (40-75 s of CPU each).
//
// It runs only with STEER_CROSSBUILD=1 (before a release, or after a
// change to system-specific code): the suite runs on a cold build cache in
// CI, where these four systems took 194 s of the suite's wall time (575 s
// against 406 s without them); compiling even one system without tests
// costs 155 s of CPU cold.
func TestCrossBuild(t *testing.T) {
	if os.Getenv("STEER_CROSSBUILD") != "1" {
		t.Skip("set STEER_CROSSBUILD=1 to compile for the other systems (minutes on a cold build cache)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, tc := range []struct {
		goos, goarch string
		args         []string
	}{
		{"linux", "386", []string{"list", "-export", "-deps", "./..."}},
		{"linux", "arm64", []string{"vet", "./..."}},
		{"freebsd", "amd64", []string{"vet", "./..."}},
		{"darwin", "arm64", []string{"vet", "./..."}},
	} {
		t.Run(tc.goos+"-"+tc.goarch, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			cmd := exec.Command("go", tc.args...)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "GOOS="+tc.goos, "GOARCH="+tc.goarch, "CGO_ENABLED=0")
			var out bytes.Buffer
			cmd.Stderr = &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go %s: %v\n%s", tc.goos, tc.goarch, strings.Join(tc.args, " "), err, out.String())
			}
			t.Logf("go %s: %v", strings.Join(tc.args, " "), time.Since(start).Round(time.Millisecond))
		})
	}
}
