package querylog

import (
	"bufio"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEntriesWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l, err := Open(Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	answers := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	full := Entry{
		Time: ts, Client: netip.MustParseAddr("198.51.100.7"),
		ECS: netip.MustParsePrefix("203.0.113.0/24"), Scope: 20,
		Name: "www.example.com.", Type: dns.TypeA, Rcode: dns.RcodeSuccess,
		Rule: 3, Pool: "eu,us", SteeredBy: "node-anycast-resolver", Answers: answers,
		Duration: 1500 * time.Nanosecond, Transport: "udp",
	}
	l.Write(&full)
	answers[0] = netip.MustParseAddr("10.9.9.9") // caller reuse must not leak into the log
	bare := Entry{
		Time: ts, Client: netip.MustParseAddr("2001:db8::53"), Scope: -1,
		Name: "x.example.", Type: 65280, Rcode: dns.RcodeNameError, Transport: "tcp",
	}
	l.Write(&bare)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != 2 || l.Dropped() != 0 {
		t.Fatalf("written=%d dropped=%d", l.Written(), l.Dropped())
	}
	lines := readLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("got %d lines", len(lines))
	}
	a := lines[0]
	want := map[string]any{
		"time": "2024-05-06T07:08:09.123456789Z", "client": "198.51.100.7",
		"ecs": "203.0.113.0/24", "scope": 20.0, "name": "www.example.com.",
		"type": "A", "rcode": "NOERROR", "rule": 3.0, "pool": "eu,us",
		"steered_by": "node-anycast-resolver", "duration_us": 1.5, "transport": "udp",
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("line 0 %s = %#v, want %#v", k, a[k], v)
		}
	}
	ans, _ := a["answers"].([]any)
	if len(ans) != 2 || ans[0] != "192.0.2.1" || ans[1] != "2001:db8::1" {
		t.Errorf("answers = %#v", a["answers"])
	}
	b := lines[1]
	for _, k := range []string{"ecs", "scope", "rule", "pool", "steered_by", "answers"} {
		if _, ok := b[k]; ok {
			t.Errorf("line 1 has %q, want omitted", k)
		}
	}
	if b["type"] != "TYPE65280" || b["rcode"] != "NXDOMAIN" || b["client"] != "2001:db8::53" ||
		b["transport"] != "tcp" || b["duration_us"] != 0.0 {
		t.Errorf("line 1 = %#v", b)
	}
}

func TestManyAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l, err := Open(Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	var as []netip.Addr
	for i := range 12 {
		as = append(as, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
	}
	l.Write(&Entry{Scope: -1, Answers: as})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if ans, _ := lines[0]["answers"].([]any); len(ans) != 12 || ans[11] != "192.0.2.11" {
		t.Fatalf("answers = %#v", lines[0]["answers"])
	}
}

func TestAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	for range 2 {
		l, err := Open(Options{Path: path, Sample: 1})
		if err != nil {
			t.Fatal(err)
		}
		l.Write(&Entry{Scope: -1})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(readLines(t, path)); n != 2 {
		t.Fatalf("got %d lines after two opens, want 2", n)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o111 != 0 || fi.Mode().Perm()&0o600 != 0o600 {
		t.Fatalf("stat %v: %v", fi.Mode(), err)
	}
}

func TestPeriodicFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	l, err := Open(Options{Path: path, Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write(&Entry{Scope: -1, Name: "flush.example."})
	deadline := time.Now().Add(2 * time.Second)
	for {
		if b, _ := os.ReadFile(path); len(b) > 0 {
			return // flushed by the ticker, before Close
		}
		if time.Now().After(deadline) {
			t.Fatal("line not flushed within 2s without Close")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSampled(t *testing.T) {
	l := newLog(io.Discard, nil, 1, 1)
	for range 10000 {
		if !l.Sampled() {
			t.Fatal("Sample=1 not sampled")
		}
	}
	l = newLog(io.Discard, nil, 0.01, 1)
	const n = 100000
	hits := 0
	for range n {
		if l.Sampled() {
			hits++
		}
	}
	if frac := float64(hits) / n; frac < 0.007 || frac > 0.013 {
		t.Fatalf("Sample=0.01 gave %.4f", frac)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Path: "stdout", Sample: 0}, {Path: "stdout", Sample: 1.5}, {Path: "stdout", Sample: -1},
		{Path: "", Sample: 1}, {Path: "stdout", Sample: 1, Buffer: -1},
		{Path: filepath.Join(t.TempDir(), "nope", "q.log"), Sample: 1},
	} {
		if l, err := Open(o); err == nil {
			l.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestNilLog(t *testing.T) {
	var l *Log
	if l.Sampled() {
		t.Fatal("nil sampled")
	}
	l.Write(&Entry{})
	if l.Written() != 0 || l.Dropped() != 0 || l.Close() != nil {
		t.Fatal("nil log not inert")
	}
}

func TestStdout(t *testing.T) {
	l, err := Open(Options{Path: "stdout", Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := os.Stdout.Stat(); err != nil {
		t.Fatalf("stdout closed: %v", err)
	}
}

func TestWriteAfterCloseDrops(t *testing.T) {
	l, err := Open(Options{Path: filepath.Join(t.TempDir(), "q.log"), Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.Write(&Entry{})
	if l.Dropped() != 1 || l.Written() != 0 {
		t.Fatalf("written=%d dropped=%d", l.Written(), l.Dropped())
	}
}

// slowWriter makes the background goroutine slow so the buffer fills.
type slowWriter struct{ w io.Writer }

func (s slowWriter) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Microsecond)
	return s.w.Write(p)
}

func TestUnderLoadNeverBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	l := newLog(f, f, 1, 16)
	l.out, l.limit = slowWriter{f}, 64 // a slow write per line or so
	go l.run()

	const workers, per = 4, 50000
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := Entry{Client: netip.AddrFrom4([4]byte{10, 0, 0, byte(w)}), Scope: -1, Name: "a.example.",
					Type: dns.TypeA, Answers: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Transport: "udp"}
				for range per {
					l.Write(&e)
				}
			}()
		}
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("Write loop blocked")
	}
	elapsed := time.Since(start)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	w, d := l.Written(), l.Dropped()
	if w+d != workers*per {
		t.Fatalf("written %d + dropped %d != %d", w, d, workers*per)
	}
	if d == 0 {
		t.Fatalf("expected drops with a tiny buffer and slow writer (written %d)", w)
	}
	if n := uint64(len(readLines(t, path))); n != w {
		t.Fatalf("file has %d lines, Written() = %d", n, w)
	}
	t.Logf("%d writes in %v: written %d dropped %d", workers*per, elapsed, w, d)
}

func TestWriteNoAllocs(t *testing.T) {
	e := Entry{Client: netip.MustParseAddr("192.0.2.9"), Scope: -1, Name: "a.example.",
		Answers: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}}
	// No writer goroutine: the buffer stays full.
	l := newLog(io.Discard, nil, 1, 4)
	for range 4 {
		l.Write(&e)
	}
	if a := testing.AllocsPerRun(1000, func() { l.Write(&e) }); a != 0 {
		t.Fatalf("Write on full buffer allocated %v times", a)
	}
	// Enqueueing with room (<= 8 answers) does not allocate either.
	l = newLog(io.Discard, nil, 1, 2000)
	if a := testing.AllocsPerRun(1000, func() { l.Write(&e) }); a != 0 {
		t.Fatalf("Write with room allocated %v times", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = l.Sampled() }); a != 0 {
		t.Fatalf("Sampled allocated %v times", a)
	}
}
