package secondary

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/peertest"
	"github.com/steer-dns/steer/internal/tsig"
)

const (
	keyName  = "sec-key."
	secret   = "c3RlZXIgeGZyIHRlc3Qga2V5IDMyIGJ5dGVzIGxvbmcu" // base64, fixed
	badSecre = "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdCBrZXkh"
	origin   = "sec.example."
)

func testKey(s string) *tsig.Key {
	return &tsig.Key{Name: keyName, Algorithm: dns.HmacSHA256, Secret: s}
}

// recorder collects what a Manager reports.
type recorder struct {
	mu      sync.Mutex
	events  []string // "kind/result"
	changed []string
}

func (r *recorder) event(origin, kind, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+"/"+result)
}

func (r *recorder) change(origin string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, origin)
}

func (r *recorder) has(ev string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == ev {
			return true
		}
	}
	return false
}

func (r *recorder) count(ev string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e == ev {
			n++
		}
	}
	return n
}

func (r *recorder) changes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changed)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, " ")
}

// newManager returns a Manager reporting to rec, logging to log, closed
// at the end of the test.
func newManager(t *testing.T, dir string, rec *recorder, log *dnstest.LockedBuffer, accept func(string, []byte) error) *Manager {
	t.Helper()
	m := New(Options{
		Dir:        dir,
		Accept:     accept,
		Changed:    rec.change,
		Event:      rec.event,
		Log:        slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinRefresh: 200 * time.Millisecond,
		Timeout:    2 * time.Second,
	})
	t.Cleanup(m.Close)
	return m
}

// zoneBody is sec.example. at serial with the SOA timers given and the
// extra records.
func zoneBody(serial uint32, timers string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 60 IN SOA ns1.%s hostmaster.%s %d %s\n", origin, origin, origin, serial, timers)
	fmt.Fprintf(&b, "%s 60 IN NS ns1.%s\n", origin, origin)
	fmt.Fprintf(&b, "ns1.%s 60 IN A 192.0.2.53\n", origin)
	for i := range 20 {
		fmt.Fprintf(&b, "host%d.%s 60 IN A 198.51.100.%d\n", i, origin, i)
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	return b.String()
}

const slowTimers = "3600 600 86400 60"

// knot is a Knot primary for sec.example. serving transfers to the test
// key, with a journal so that it serves IXFR after a reload.
type knot struct {
	*peertest.Server
	file     string
	debugLog string
}

// debug returns what Knot logged at debug level.
func (k *knot) debug() string {
	b, _ := os.ReadFile(k.debugLog)
	return string(b)
}

func startKnot(t *testing.T, body string) *knot {
	t.Helper()
	return startKnotACL(t, body, "127.0.0.1")
}

// startKnotACL is startKnot with transfers allowed from aclAddr only.
func startKnotACL(t *testing.T, body, aclAddr string) *knot {
	t.Helper()
	dnstest.NeedTool(t, "knotc")
	dir := t.TempDir()
	file := filepath.Join(dir, "sec.example.zone")
	debugLog := filepath.Join(dir, "knot-debug.log")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s := peertest.StartKnot(t, []peertest.Zone{{Origin: origin, File: file}}, peertest.Options{
		// Knot logs TSIG and ACL failures at debug level only: a second
		// log target, a file, has them.
		Top: fmt.Sprintf(`log:
  - target: %s
    any: debug
key:
  - id: %s
    algorithm: hmac-sha256
    secret: %s
acl:
  - id: xfr
    address: %s
    key: %s
    action: transfer
`, debugLog, keyName, secret, aclAddr, keyName),
		// Later items override peertest's "zonefile-load: whole" and
		// "journal-content: none": a reload then computes the
		// difference and keeps it in the journal for IXFR.
		Zone: "acl: xfr\nzonefile-load: difference\njournal-content: changes\n",
	})
	if !s.Loaded(origin) {
		t.Fatalf("knot did not load the zone:\n%s", s.Log.String())
	}
	// peertest does not create the database directory; the journal
	// needs it before the first change.
	if err := os.MkdirAll(filepath.Join(s.Dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &knot{s, file, debugLog}
}

func (k *knot) knotc(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("knotc", append([]string{"-c", filepath.Join(k.Dir, "knot.conf"), "-t", "5"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("knotc %v: %v\n%s\nknot log:\n%s", args, err, out, k.Log.String())
	}
}

// change writes a new zone file and has Knot load it.
func (k *knot) change(t *testing.T, body string) {
	t.Helper()
	if err := os.WriteFile(k.file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	k.knotc(t, "-b", "zone-reload", origin)
	serial := strings.Fields(body)[6]
	dnstest.WaitFor(t, 5*time.Second, "knot to serve serial "+serial, func() bool {
		q := new(dns.Msg)
		q.SetQuestion(origin, dns.TypeSOA)
		r, err := k.Exchange(q, "udp")
		return err == nil && len(r.Answer) == 1 && fmt.Sprint(r.Answer[0].(*dns.SOA).Serial) == serial
	})
}

// stop stops knotd (peertest's own stop at cleanup then finds it gone).
func (k *knot) stop(t *testing.T) {
	t.Helper()
	k.knotc(t, "stop")
	dnstest.WaitFor(t, 5*time.Second, "knotd to stop", func() bool {
		return strings.Contains(k.Log.String(), "shutting down") || strings.Contains(k.Log.String(), "stopped")
	})
	time.Sleep(100 * time.Millisecond)
}
