package querylog

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// mountTmpfs mounts a tmpfs of the given size option (e.g. "64k") on a new
// temporary directory, unmounted at cleanup. It skips the test when mounting
// is not permitted, unless STEER_REQUIRE_TOOLS=1.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
			t.Fatalf("mount -t tmpfs -o size=%s: %v", size, err)
		}
		t.Skipf("cannot mount a tmpfs (needs root/CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// TestDiskFull fills a real 64 KiB file system under the log, then frees it:
// logging resumes, the failure and the recovery are each reported once, and
// the file holds exactly the Written lines, all of them whole.
func TestDiskFull(t *testing.T) {
	dir := mountTmpfs(t, "64k")
	path := filepath.Join(dir, "q.log")
	logger, logs := newSlog()
	l, err := Open(Options{Path: path, Sample: 1, Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // before the unmount
	total := 0
	write := func() { l.Write(entry(total)); total++ }

	for range 20 {
		write()
	}
	dnstest.WaitFor(t, 3*time.Second, "the first lines", func() bool { return l.Written() == 20 })

	// Take all the remaining space.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for i := 0; ; i++ {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filler: %v", err)
			}
			break
		}
		if i > 64 {
			t.Fatal("a 64k tmpfs took more than 256 KiB")
		}
	}
	f.Close()

	// The log file's last page still has room for some lines; keep writing
	// until the writer fails and says so.
	dnstest.WaitFor(t, 5*time.Second, "the write failure to be reported", func() bool {
		write()
		return len(logs.records(t, msgFailed)) > 0
	})
	// Stay full across a few retries: still only one report.
	for range 4 {
		for range 10 {
			write()
		}
		time.Sleep(flushInterval)
	}
	if n := len(logs.records(t, msgFailed)); n != 1 {
		t.Fatalf("failure reported %d times", n)
	}
	if len(logs.records(t, msgRecovered)) != 0 {
		t.Fatal("recovery reported while the disk is full")
	}
	droppedFull := l.Dropped()
	if droppedFull == 0 {
		t.Fatal("nothing dropped on a full disk")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	dnstest.WaitFor(t, 5*time.Second, "the recovery to be reported", func() bool {
		write()
		return len(logs.records(t, msgRecovered)) > 0
	})
	written := l.Written()
	for range 10 {
		write()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() < written+10 {
		t.Fatalf("Written %d after recovery, want at least %d", l.Written(), written+10)
	}

	fails, recs := logs.records(t, msgFailed), logs.records(t, msgRecovered)
	if len(fails) != 1 || len(recs) != 1 {
		t.Fatalf("failure reported %d times, recovery %d times; want once each", len(fails), len(recs))
	}
	if fails[0]["level"] != "ERROR" || fails[0]["path"] != path || fails[0]["err"] == nil {
		t.Errorf("failure record %v", fails[0])
	}
	if d, _ := recs[0]["dropped"].(float64); d < float64(droppedFull) || uint64(d) > l.Dropped() {
		t.Errorf("recovery record %v; dropped while full %d, in all %d", recs[0], droppedFull, l.Dropped())
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		t.Fatalf("file does not end with a whole line: ...%q", data[max(0, len(data)-40):])
	}
	lines := bytes.Split(data[:len(data)-1], []byte{'\n'})
	for i, ln := range lines {
		if !json.Valid(ln) {
			t.Fatalf("line %d is not JSON (torn?): %q", i, ln)
		}
	}
	if uint64(len(lines)) != l.Written() {
		t.Fatalf("file has %d lines, Written %d", len(lines), l.Written())
	}
	if l.Written()+l.Dropped() != uint64(total) {
		t.Fatalf("Written %d + Dropped %d != %d entries", l.Written(), l.Dropped(), total)
	}
	t.Logf("%d entries: %d written, %d dropped; failure: %v", total, l.Written(), l.Dropped(), fails[0]["err"])
}
