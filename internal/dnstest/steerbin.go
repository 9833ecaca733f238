package dnstest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// SteerBinary returns the path of a plain (not raced) build of cmd/steer
// for tests that run the binary, linking it at most once for every test
// package that asks: go run keeps the executables it links in the build
// cache (Go 1.24), and with -exec echo it prints the cached executable's
// path instead of running it. Three test packages run the binary
// (cmd/steer, internal/uitest, internal/steeringtest); each linking its
// own copy cost 5-8 s of one of the test stages' two CPUs. The first call
// after a change links into go run's work directory, which go deletes
// when it exits, and caches the result; the second then names the cached
// file. Where the cache does not keep it, the binary is built into dir.
//
// The path is the build cache's: run it, never write beside it.
func SteerBinary(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range 2 {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, goTool, "run", "-exec", "echo", "github.com/steer-dns/steer/cmd/steer")
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go run -exec echo cmd/steer: %v\n%s", err, errb.String())
		}
		path := strings.TrimSpace(out.String())
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	path := filepath.Join(dir, "steer")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", path, "github.com/steer-dns/steer/cmd/steer")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/steer: %v\n%s", err, out)
	}
	return path, nil
}
