// Package querylog is the sampled query log: JSON lines written by a
// background goroutine from a bounded buffer that drops (and counts) rather
// than ever blocking the query path.
//
// Write copies the entry into a fixed-size channel with a non-blocking send.
// Up to inlineAnswers answer addresses are copied into a fixed array inside
// the buffered record, so Write performs no allocation for typical answers
// (and never allocates when the buffer is full). Entries with more than
// inlineAnswers addresses cost one allocation for the copy of the extra
// addresses when the buffer has room.
//
// # Output errors
//
// The writer goroutine collects whole lines and hands them to the file in
// one write at most every flushInterval (or when 64 KiB are pending). A
// failed write (a full disk, an I/O error) does not end the log: the first
// failure of an outage is reported once through Options.Log at error level,
// entries are then dropped (and counted in Dropped) while the writer keeps
// retrying with the newest lines at every flush interval, and the first
// write that succeeds again is reported once at warn level with the number
// of entries dropped meanwhile. Written counts only lines that the write
// system call accepted completely (they reached the kernel, not necessarily
// the disk: there is no fsync). A line is either in the file completely or
// not at all: when a write stops partway through a line, that fragment is
// truncated away again (see untear).
//
// # Rotation and reconfiguration
//
// Reopen closes the file and opens the same path again, for rotation by
// rename (mv q.log q.log.1, then Reopen: new lines go to a new q.log; lines
// written before Reopen are flushed to the old file first). SetSample
// changes the sample rate, an atomic read by Sampled on the query path; a
// new path is a new Log. Neither blocks Write, which never waits for the
// writer goroutine.
//
// A Collector (metrics.go) exposes the entries written and dropped.
package querylog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DefaultBuffer is the number of buffered entries when Options.Buffer is 0.
const DefaultBuffer = 4096

// flushInterval bounds how long an encoded line waits before it is written,
// and is the retry interval while writes fail.
const flushInterval = 250 * time.Millisecond

// flushSize is the amount of pending lines that triggers a write before the
// flush interval (and bounds what is held while writes fail).
const flushSize = 64 << 10

// inlineAnswers is the number of answer addresses copied without allocation.
const inlineAnswers = 8

// ErrClosed is returned by Reopen and SetSample on a closed Log.
var ErrClosed = errors.New("querylog: closed")

// Entry is one logged query.
type Entry struct {
	Time   time.Time
	Client netip.Addr   // packet source
	ECS    netip.Prefix // client subnet as sent (invalid when none)
	Scope  int          // returned ECS scope (-1 when no ECS option was returned)
	Name   string
	Type   uint16
	Rcode  int
	Rule   int    // 1-based steering rule that decided, 0 when not steered
	Pool   string // comma-joined pools answered, "" when not steered
	// SteeredBy is what steered the answer when it was not the client
	// (ECS subnet or resolver address): "node-anycast-resolver" or
	// "node-unplaced-resolver" (ecs.unknown_client: node); "" otherwise.
	SteeredBy string
	Answers   []netip.Addr // A/AAAA addresses in the answer
	Duration  time.Duration
	Transport string // "udp" or "tcp"
}

// Options configures Open.
type Options struct {
	Path   string       // file path, or "stdout"
	Sample float64      // 0 < Sample <= 1
	Buffer int          // buffered entries; DefaultBuffer when 0
	Log    *slog.Logger // reports write failures and recoveries; nil discards
}

// record is the buffered form of an Entry: the Answers slice is replaced by
// an inline copy so the caller may reuse its slice after Write returns.
type record struct {
	e   Entry // e.Answers is nil unless more than inlineAnswers (then a private copy)
	n   int
	inl [inlineAnswers]netip.Addr
}

// ctl is a request to the writer goroutine, which owns the output.
type ctl struct {
	reply chan error
}

// Log is a sampled, asynchronous query log. A nil *Log is valid and inert.
type Log struct {
	sample atomic.Uint64 // math.Float64bits of the sample rate
	ch     chan record
	ctl    chan ctl
	done   chan struct{}
	exited chan struct{}

	closed  atomic.Bool
	dropped atomic.Uint64
	written atomic.Uint64

	once    sync.Once
	closeEr error // set by the writer goroutine before exited is closed

	// Owned by the writer goroutine (and by newLog's caller before run).
	out     io.Writer
	file    *os.File  // the file behind out when it may be truncated; nil for stdout
	closer  io.Closer // nil for stdout
	path    string    // "stdout", a file path, or "" (injected writer)
	log     *slog.Logger
	limit   int    // pending bytes that trigger a write
	buf     []byte // pending complete lines
	bufN    int    // lines in buf
	failing bool   // the last write failed; reported, not yet recovered
	failAt  uint64 // Dropped() when the outage began
	lastErr error  // error of the last write, nil after a success
	torn    bool   // out may end in a line fragment that could not be truncated
}

// Open opens (creating, 0644) o.Path for append, or uses standard output
// when o.Path is "stdout", and starts the writer goroutine.
func Open(o Options) (*Log, error) {
	if err := validSample(o.Sample); err != nil {
		return nil, err
	}
	if o.Buffer < 0 {
		return nil, fmt.Errorf("querylog: negative buffer %d", o.Buffer)
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	out, f, err := openOut(o.Path)
	if err != nil {
		return nil, err
	}
	var closer io.Closer
	if f != nil {
		closer = f
	}
	l := newLog(out, closer, o.Sample, o.Buffer)
	l.path = o.Path
	if o.Log != nil {
		l.log = o.Log
	}
	go l.run()
	return l, nil
}

func validSample(s float64) error {
	if !(s > 0 && s <= 1) {
		return fmt.Errorf("querylog: sample %v out of range (0, 1]", s)
	}
	return nil
}

// openOut opens path for appending; f is nil for "stdout".
func openOut(path string) (out io.Writer, f *os.File, err error) {
	switch path {
	case "":
		return nil, nil, errors.New("querylog: empty path")
	case "stdout":
		return os.Stdout, nil, nil
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("querylog: %w", err)
	}
	return f, f, nil
}

// newLog builds a Log writing to out without starting the writer goroutine.
// If closer is an *os.File it is also used to truncate torn lines.
func newLog(out io.Writer, closer io.Closer, sample float64, buffer int) *Log {
	l := &Log{
		ch:     make(chan record, buffer),
		ctl:    make(chan ctl),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		out:    out,
		closer: closer,
		log:    slog.New(slog.DiscardHandler),
		limit:  flushSize,
	}
	l.file, _ = closer.(*os.File)
	l.sample.Store(math.Float64bits(sample))
	return l
}

// Sampled reports whether the current query should be logged. It is a
// lock-free random draw; a nil *Log always returns false.
func (l *Log) Sampled() bool {
	if l == nil {
		return false
	}
	s := math.Float64frombits(l.sample.Load())
	return s >= 1 || rand.Float64() < s
}

// SetSample changes the sample rate, 0 < s <= 1, from the next Sampled call
// on. It is safe to call at any time; a nil *Log ignores it.
func (l *Log) SetSample(s float64) error {
	if err := validSample(s); err != nil {
		return err
	}
	if l == nil {
		return nil
	}
	if l.closed.Load() {
		return ErrClosed
	}
	l.sample.Store(math.Float64bits(s))
	return nil
}

// Reopen flushes what is pending to the current file, closes it and opens
// the same path again (creating it, for rotation by rename). It is a no-op
// for standard output and a nil *Log. If the path cannot be opened the log
// keeps writing to the file it had, and the error is returned.
func (l *Log) Reopen() error {
	if l == nil {
		return nil
	}
	return l.request(ctl{})
}

// request hands c to the writer goroutine and waits for its answer.
func (l *Log) request(c ctl) error {
	if l.closed.Load() {
		return ErrClosed
	}
	c.reply = make(chan error, 1)
	select {
	case l.ctl <- c:
		return <-c.reply
	case <-l.exited:
		return ErrClosed
	}
}

// Write enqueues a copy of *e without blocking. If the buffer is full (or the
// log is closed) the entry is dropped and counted. A nil *Log does nothing.
// The caller may reuse e and e.Answers as soon as Write returns.
func (l *Log) Write(e *Entry) {
	if l == nil || e == nil {
		return
	}
	if l.closed.Load() || len(l.ch) == cap(l.ch) {
		l.dropped.Add(1)
		return
	}
	var r record
	r.e = *e
	r.e.Answers = nil
	if len(e.Answers) <= inlineAnswers {
		r.n = copy(r.inl[:], e.Answers)
	} else {
		r.e.Answers = append([]netip.Addr(nil), e.Answers...) // documented allocation
	}
	select {
	case l.ch <- r:
	default:
		l.dropped.Add(1)
	}
}

// Dropped returns the number of entries dropped because the buffer was full,
// the log was closed, or the entry could not be written.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Written returns the number of entries whose line was written to the
// output completely.
func (l *Log) Written() uint64 {
	if l == nil {
		return 0
	}
	return l.written.Load()
}

// Close stops accepting entries, writes everything already buffered and
// closes the file (standard output is not closed). Writes racing with Close
// may be dropped and are counted as such. Close is idempotent; it returns
// the error of the last write if that failed (the log was still failing:
// the entries are counted as dropped), else the error of closing the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.done)
		<-l.exited
	})
	return l.closeEr
}

func (l *Log) run() {
	defer close(l.exited)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case r := <-l.ch:
			l.add(&r)
		case <-t.C:
			l.flush()
		case c := <-l.ctl:
			// Entries enqueued before the request belong to the current file.
			for n := len(l.ch); n > 0; n-- {
				r := <-l.ch
				l.add(&r)
			}
			c.reply <- l.switchTo()
		case <-l.done:
			for len(l.ch) > 0 {
				r := <-l.ch
				l.add(&r)
			}
			l.flush()
			err := l.lastErr
			if l.closer != nil {
				if cerr := l.closer.Close(); err == nil {
					err = cerr
				}
			}
			l.closeEr = err
			return
		}
	}
}

// add encodes one record as a JSON line into the pending buffer. While
// writes fail, at most one buffer's worth is held for the next retry and
// further entries are dropped.
func (l *Log) add(r *record) {
	if l.failing && len(l.buf) >= l.limit {
		l.dropped.Add(1)
		return
	}
	l.buf = appendLine(l.buf, r)
	l.bufN++
	if !l.failing && len(l.buf) >= l.limit {
		l.flush()
	}
}

var newline = []byte{'\n'}

// flush writes the pending lines with one write call and accounts for them:
// the lines that reached the output completely are Written, the others are
// Dropped. The buffer is emptied either way, so a retry after a failure
// carries only lines encoded since, never a second copy of a line.
func (l *Log) flush() {
	if l.bufN == 0 {
		return
	}
	lines := l.bufN
	var (
		n   int
		err error
	)
	if l.torn {
		if _, err = l.out.Write(newline); err == nil {
			l.torn = false
		}
	}
	if err == nil {
		n, err = l.out.Write(l.buf)
		if err == nil && n < len(l.buf) {
			err = io.ErrShortWrite
		}
	}
	done := bytes.Count(l.buf[:n], newline)
	if frag := n - (bytes.LastIndexByte(l.buf[:n], '\n') + 1); frag > 0 {
		l.untear(int64(frag))
	}
	l.buf = l.buf[:0]
	l.bufN = 0
	l.written.Add(uint64(done))
	l.lastErr = err
	if err == nil {
		if l.failing {
			l.failing = false
			l.log.Warn("query log: writing again", "path", l.name(),
				"dropped", l.dropped.Load()-l.failAt)
		}
		return
	}
	if !l.failing {
		l.failing = true
		l.failAt = l.dropped.Load()
		l.log.Error("query log: write failed; entries are dropped until it recovers",
			"path", l.name(), "err", err)
	}
	l.dropped.Add(uint64(lines - done))
}

// untear removes the last frag bytes of the output, a line cut short by a
// failed write, so that the file only ever holds complete lines. Truncating
// (rather than only starting the next write with a newline) keeps every
// line of the file valid JSON. We are the only writer of the file (it is
// opened O_APPEND, so its size is our end of data). Where truncation is not
// possible (standard output, an injected writer, a failing truncate) the
// next write starts with a newline instead: the fragment then stands alone
// as one invalid line, but the following lines start at a line boundary.
func (l *Log) untear(frag int64) {
	if l.file != nil {
		if fi, err := l.file.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() >= frag {
			if l.file.Truncate(fi.Size()-frag) == nil {
				return
			}
		}
	}
	l.torn = true
}

// switchTo flushes to the current output, then opens the current path
// again and closes the previous file. Standard output is never closed or
// reopened.
func (l *Log) switchTo() error {
	path := l.path
	if path == "" || path == "stdout" {
		return nil
	}
	l.flush()
	out, f, err := openOut(path)
	if err != nil {
		return err
	}
	// A fragment that could not be truncated stays a concern only if the new
	// output is the same file (or stdout again).
	if l.torn {
		l.torn = f == nil && l.file == nil || sameFile(f, l.file)
	}
	var cerr error
	if l.closer != nil {
		cerr = l.closer.Close()
	}
	l.out, l.file, l.closer, l.path = out, f, nil, path
	if f != nil {
		l.closer = f
	}
	if cerr != nil {
		return fmt.Errorf("querylog: closing the previous file: %w", cerr)
	}
	return nil
}

func sameFile(a, b *os.File) bool {
	if a == nil || b == nil {
		return false
	}
	ai, err1 := a.Stat()
	bi, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

func (l *Log) name() string {
	if l.path == "" {
		return "(writer)"
	}
	return l.path
}

// line is the JSON shape of one log line.
type line struct {
	Time       string   `json:"time"`
	Client     string   `json:"client"`
	ECS        string   `json:"ecs,omitempty"`
	Scope      *int     `json:"scope,omitempty"`
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Rcode      string   `json:"rcode"`
	Rule       int      `json:"rule,omitempty"`
	Pool       string   `json:"pool,omitempty"`
	SteeredBy  string   `json:"steered_by,omitempty"`
	Answers    []string `json:"answers,omitempty"`
	DurationUS float64  `json:"duration_us"`
	Transport  string   `json:"transport"`
}

func appendLine(buf []byte, r *record) []byte {
	e := &r.e
	ln := line{
		Time:       e.Time.Format(time.RFC3339Nano),
		Name:       e.Name,
		Type:       typeString(e.Type),
		Rcode:      rcodeString(e.Rcode),
		Rule:       e.Rule,
		Pool:       e.Pool,
		SteeredBy:  e.SteeredBy,
		DurationUS: float64(e.Duration) / float64(time.Microsecond),
		Transport:  e.Transport,
	}
	if e.Client.IsValid() {
		ln.Client = e.Client.String()
	}
	if e.ECS.IsValid() {
		ln.ECS = e.ECS.String()
	}
	if e.Scope >= 0 {
		s := e.Scope
		ln.Scope = &s
	}
	answers := e.Answers
	if answers == nil {
		answers = r.inl[:r.n]
	}
	if len(answers) > 0 {
		ln.Answers = make([]string, len(answers))
		for i, a := range answers {
			ln.Answers[i] = a.String()
		}
	}
	b, err := json.Marshal(&ln)
	if err != nil { // cannot happen for this struct; keep the line count honest
		b = []byte(`{}`)
	}
	buf = append(buf, b...)
	return append(buf, '\n')
}

func typeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return fmt.Sprintf("TYPE%d", t)
}

func rcodeString(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rc)
}
