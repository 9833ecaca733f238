//go:build linux

package node

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// openCounter counts the opens of files through inotify (IN_OPEN), so a
// test sees how often the node itself opens them. It watches the closes
// too: inotify merges an event into an identical one still queued, and a
// close between two opens keeps them apart.
type openCounter struct {
	fd    int
	names map[int32]string
}

func newOpenCounter(t *testing.T, paths ...string) *openCounter {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	c := &openCounter{fd: fd, names: map[int32]string{}}
	for _, p := range paths {
		wd, err := syscall.InotifyAddWatch(fd, p, syscall.IN_OPEN|syscall.IN_CLOSE_NOWRITE)
		if err != nil {
			t.Fatal(err)
		}
		c.names[int32(wd)] = filepath.Base(p)
	}
	return c
}

// take returns the opens queued since the last call: the events of an
// open are queued by the open itself, so every open that has returned is
// counted.
func (c *openCounter) take(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(c.fd, buf)
		if err == syscall.EAGAIN || n <= 0 {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				out[c.names[ev.Wd]]++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// TestSecretFilesReadOncePerLoad: starting a node opens the API token file
// and the cookie secret file once each, and so does each reload, whether
// the configuration changed or not.
func TestSecretFilesReadOncePerLoad(t *testing.T) {
	dir := t.TempDir()
	cfg := `zones:
  - origin: example.com
    file: example.com.zone
api: { listen: "127.0.0.1:0", token_file: token }
cookies: { secret_file: cookie.key }
`
	writeFile(t, dir, "steer.yaml", cfg)
	writeFile(t, dir, "example.com.zone", zone("example.com", 1, "x"))
	writeFile(t, dir, "token", "tok\n")
	writeFile(t, dir, "cookie.key", secretA+"\n")
	oc := newOpenCounter(t, filepath.Join(dir, "token"), filepath.Join(dir, "cookie.key"))
	once := func(what string) {
		t.Helper()
		got := oc.take(t)
		if got["token"] != 1 || got["cookie.key"] != 1 {
			t.Errorf("%s opened the secret files %v, want once each", what, got)
		}
	}
	n := startNodeIn(t, dir, Options{})
	once("start")
	if res, err := n.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v %+v", err, res)
	}
	once("a reload of the same configuration")
	writeFile(t, dir, "steer.yaml", cfg+"identity: changed\n")
	if res, err := n.Reload(context.Background()); err != nil {
		t.Fatalf("reload: %v %+v", err, res)
	}
	once("a reload of a changed configuration")
}
