package querylog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/dnstest"
)

// syncBuffer is a bytes.Buffer safe for the writer goroutine's slog output
// and the test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON slog records with message msg.
func (s *syncBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	data := append([]byte(nil), s.b.Bytes()...)
	s.mu.Unlock()
	var out []map[string]any
	for _, ln := range bytes.Split(data, []byte{'\n'}) {
		if len(ln) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(ln, &m); err != nil {
			t.Fatalf("slog line %q: %v", ln, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const (
	msgFailed    = "query log: write failed; entries are dropped until it recovers"
	msgRecovered = "query log: writing again"
)

func newSlog() (*slog.Logger, *syncBuffer) {
	b := &syncBuffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func entry(i int) *Entry {
	return &Entry{Time: time.Unix(int64(i), 0).UTC(), Client: netip.MustParseAddr("192.0.2.7"), Scope: -1,
		Name: fmt.Sprintf("q%d.example.", i), Type: dns.TypeA, Transport: "udp",
		Answers: []netip.Addr{netip.MustParseAddr("198.51.100.1")}}
}

// names returns the "name" field of every line of path, failing the test on
// an invalid line or a missing final newline.
func names(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a newline: ...%q", path, b[max(0, len(b)-40):])
	}
	var out []string
	for _, m := range readLines(t, path) {
		out = append(out, m["name"].(string))
	}
	return out
}

func TestReopenRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.log")
	l, err := Open(Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for range 10 {
		l.Write(entry(n))
		n++
	}
	dnstest.WaitFor(t, 3*time.Second, "10 lines written", func() bool { return l.Written() == 10 })
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	for range 5 { // after the rename, before Reopen: still the old file
		l.Write(entry(n))
		n++
	}
	if err := l.Reopen(); err != nil { // flushes the 5 lines to the old file
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil { // the new, empty file
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		l.Write(entry(n))
		n++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, mid, cur := names(t, path+".2"), names(t, path+".1"), names(t, path)
	if len(old) != 15 || len(mid) != 0 || len(cur) != 7 {
		t.Fatalf("lines: old %d, middle %d, current %d; want 15, 0, 7", len(old), len(mid), len(cur))
	}
	if old[14] != "q14.example." || cur[0] != "q15.example." {
		t.Fatalf("wrong split: old ends %q, new starts %q", old[14], cur[0])
	}
	if w := l.Written(); w != uint64(len(old)+len(cur)) || l.Dropped() != 0 {
		t.Fatalf("Written %d Dropped %d, files hold %d", w, l.Dropped(), len(old)+len(cur))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644&^umask() {
		t.Fatalf("reopened file mode %v: %v", fi.Mode(), err)
	}
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// TestReopenConcurrent rotates while several goroutines write: nothing is
// lost or duplicated, and Write keeps never blocking.
func TestReopenConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.log")
	l, err := Open(Options{Path: path, Sample: 1, Buffer: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const workers, rotations = 4, 20
	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		total atomic.Uint64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := entry(w)
			for !stop.Load() {
				l.Write(e)
				total.Add(1)
			}
		}()
	}
	for i := range rotations {
		if err := os.Rename(path, fmt.Sprintf("%s.%d", path, i)); err != nil {
			t.Fatal(err)
		}
		if err := l.Reopen(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	if len(files) != rotations+1 {
		t.Fatalf("%d files after %d rotations", len(files), rotations)
	}
	lines := 0
	for _, f := range files {
		lines += len(names(t, f))
	}
	if w := l.Written(); uint64(lines) != w || w+l.Dropped() != total.Load() || w == 0 {
		t.Fatalf("files hold %d lines, Written %d, Dropped %d, total %d", lines, w, l.Dropped(), total.Load())
	}
}

func TestReopenFailureKeepsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "logs", "q.log")
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(entry(0))
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(filepath.Dir(path), moved); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil { // logs/ is gone: cannot create logs/q.log
		t.Fatal("Reopen into a missing directory succeeded")
	}
	l.Write(entry(1))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(moved, "q.log")); len(got) != 2 || l.Written() != 2 {
		t.Fatalf("old file has %v, Written %d; want both lines there", got, l.Written())
	}
}

func TestReopenStdoutAndClosed(t *testing.T) {
	l, err := Open(Options{Path: "stdout", Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatalf("Reopen on stdout: %v", err)
	}
	l.Close()
	if _, err := os.Stdout.Stat(); err != nil {
		t.Fatalf("stdout closed: %v", err)
	}
	if err := l.Reopen(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reopen after Close = %v, want ErrClosed", err)
	}
	if err := l.SetSample(0.5); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetSample after Close = %v", err)
	}
	var nl *Log
	if nl.Reopen() != nil || nl.SetSample(0.5) != nil {
		t.Fatal("nil Log: Reopen/SetSample must be inert")
	}
}

func TestSetSample(t *testing.T) {
	l, err := Open(Options{Path: "stdout", Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 1000 {
		if !l.Sampled() {
			t.Fatal("sample 1 not sampled")
		}
	}
	for _, bad := range []float64{0, -0.5, 1.0001, math.NaN(), math.Inf(1)} {
		if err := l.SetSample(bad); err == nil {
			t.Errorf("SetSample(%v) accepted", bad)
		}
	}
	if err := l.SetSample(0.001); err != nil {
		t.Fatal(err)
	}
	// Binomial(100000, 0.001): mean 100, sd ~10. A sample stuck at 1 gives
	// 100000, one stuck at a bad value 0 or 1.
	const n = 100000
	hits := 0
	for range n {
		if l.Sampled() {
			hits++
		}
	}
	if hits < 40 || hits > 200 {
		t.Fatalf("sample 0.001 gave %d of %d", hits, n)
	}
	if err := l.SetSample(1); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if !l.Sampled() {
			t.Fatal("sample back at 1 not sampled")
		}
	}
	if a := testing.AllocsPerRun(1000, func() { _ = l.Sampled() }); a != 0 {
		t.Fatalf("Sampled allocated %v times", a)
	}
}

// flakyFile writes to a real file but, while fail is set, writes only half
// of each buffer and then fails with ENOSPC, as a filling disk does.
type flakyFile struct {
	f    *os.File
	fail atomic.Bool
}

func (w *flakyFile) Write(p []byte) (int, error) {
	if !w.fail.Load() {
		return w.f.Write(p)
	}
	n, err := w.f.Write(p[:len(p)/2])
	if err == nil {
		err = syscall.ENOSPC
	}
	return n, err
}

// pump does the writer goroutine's work synchronously: encode what is
// queued, then flush (as the ticker would).
func pump(l *Log) {
	for len(l.ch) > 0 {
		r := <-l.ch
		l.add(&r)
	}
	l.flush()
}

// writeErrorScenario drives a log over a flaky writer through success,
// two failing flushes (with partial writes) and recovery, and returns the
// file's contents.
func writeErrorScenario(t *testing.T, truncatable bool) (l *Log, logs *syncBuffer, data []byte, total int) {
	path := filepath.Join(t.TempDir(), "q.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w := &flakyFile{f: f}
	var closer io.Closer
	if truncatable {
		closer = f
	}
	l = newLog(w, closer, 1, 100)
	l.path = path
	l.log, logs = newSlog()
	write := func(k int) {
		for range k {
			l.Write(entry(total))
			total++
		}
		pump(l)
	}
	write(3)
	w.fail.Store(true)
	write(3) // half: one complete line and a fragment
	// Half again: two complete lines when the fragment was truncated; else
	// the newline that must precede them fails already.
	write(4)
	want := uint64(3 + 1 + 2)
	if !truncatable {
		want = 3 + 1
	}
	if l.Written() != want {
		t.Fatalf("Written %d during failure, want %d complete lines", l.Written(), want)
	}
	if n := len(logs.records(t, msgFailed)); n != 1 {
		t.Fatalf("failure logged %d times after two failing flushes", n)
	}
	w.fail.Store(false)
	write(2)
	write(2)
	go l.run()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !truncatable {
		f.Close()
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fails, recs := logs.records(t, msgFailed), logs.records(t, msgRecovered)
	if len(fails) != 1 || len(recs) != 1 {
		t.Fatalf("failure logged %d times, recovery %d times; want 1 and 1:\n%s", len(fails), len(recs), logs.b.String())
	}
	if fails[0]["level"] != "ERROR" || fails[0]["path"] != path || !strings.Contains(fails[0]["err"].(string), "no space") {
		t.Errorf("failure record %v", fails[0])
	}
	if d, _ := recs[0]["dropped"].(float64); uint64(d) != l.Dropped() || d == 0 {
		t.Errorf("recovery record %v, Dropped %d", recs[0], l.Dropped())
	}
	if l.Written()+l.Dropped() != uint64(total) {
		t.Errorf("Written %d + Dropped %d != %d", l.Written(), l.Dropped(), total)
	}
	return l, logs, data, total
}

// TestWriteErrorTruncatesTornLine: a failed write that stopped mid-line is
// cut back to the last line boundary, so the file holds only whole lines.
func TestWriteErrorTruncatesTornLine(t *testing.T) {
	l, _, data, _ := writeErrorScenario(t, true)
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("torn line %q", sc.Text())
		}
		n++
	}
	if uint64(n) != l.Written() || n != 10 {
		t.Fatalf("file has %d lines, Written %d, want 10", n, l.Written())
	}
}

// TestWriteErrorWithoutTruncate: when the output cannot be truncated (as
// standard output), the line after a fragment still starts on a new line.
func TestWriteErrorWithoutTruncate(t *testing.T) {
	l, _, data, _ := writeErrorScenario(t, false)
	good, bad := 0, 0
	for _, ln := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if json.Valid([]byte(ln)) {
			good++
		} else {
			bad++
		}
	}
	if uint64(good) != l.Written() || good != 8 || bad != 1 {
		t.Fatalf("%d valid lines (Written %d, want 8), %d fragments (want 1):\n%s", good, l.Written(), bad, data)
	}
}
