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
package querylog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// flushInterval bounds how long an encoded line may sit in the bufio.Writer.
const flushInterval = 250 * time.Millisecond

// inlineAnswers is the number of answer addresses copied without allocation.
const inlineAnswers = 8

// Entry is one logged query.
type Entry struct {
	Time      time.Time
	Client    netip.Addr   // packet source
	ECS       netip.Prefix // client subnet as sent (invalid when none)
	Scope     int          // returned ECS scope (-1 when no ECS option was returned)
	Name      string
	Type      uint16
	Rcode     int
	Rule      int          // 1-based steering rule that decided, 0 when not steered
	Pool      string       // comma-joined pools answered, "" when not steered
	Answers   []netip.Addr // A/AAAA addresses in the answer
	Duration  time.Duration
	Transport string // "udp" or "tcp"
}

// Options configures Open.
type Options struct {
	Path   string  // file path, or "stdout"
	Sample float64 // 0 < Sample <= 1
	Buffer int     // buffered entries; DefaultBuffer when 0
}

// record is the buffered form of an Entry: the Answers slice is replaced by
// an inline copy so the caller may reuse its slice after Write returns.
type record struct {
	e   Entry // e.Answers is nil unless more than inlineAnswers (then a private copy)
	n   int
	inl [inlineAnswers]netip.Addr
}

// Log is a sampled, asynchronous query log. A nil *Log is valid and inert.
type Log struct {
	sample float64
	ch     chan record
	done   chan struct{}
	exited chan struct{}

	w      *bufio.Writer
	closer io.Closer // nil for stdout

	closed  atomic.Bool
	dropped atomic.Uint64
	written atomic.Uint64

	once    sync.Once
	werr    error // first write/flush error, owned by the writer goroutine until exited
	closeEr error
}

// Open opens (creating, 0644) o.Path for append, or uses standard output
// when o.Path is "stdout", and starts the writer goroutine.
func Open(o Options) (*Log, error) {
	if !(o.Sample > 0 && o.Sample <= 1) {
		return nil, fmt.Errorf("querylog: sample %v out of range (0, 1]", o.Sample)
	}
	if o.Buffer < 0 {
		return nil, fmt.Errorf("querylog: negative buffer %d", o.Buffer)
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	var (
		out    io.Writer
		closer io.Closer
	)
	switch o.Path {
	case "":
		return nil, errors.New("querylog: empty path")
	case "stdout":
		out = os.Stdout
	default:
		f, err := os.OpenFile(o.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("querylog: %w", err)
		}
		out, closer = f, f
	}
	l := newLog(out, closer, o.Sample, o.Buffer)
	go l.run()
	return l, nil
}

func newLog(out io.Writer, closer io.Closer, sample float64, buffer int) *Log {
	return &Log{
		sample: sample,
		ch:     make(chan record, buffer),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
		w:      bufio.NewWriterSize(out, 64<<10),
		closer: closer,
	}
}

// Sampled reports whether the current query should be logged. It is a
// lock-free random draw; a nil *Log always returns false.
func (l *Log) Sampled() bool {
	if l == nil {
		return false
	}
	return l.sample >= 1 || rand.Float64() < l.sample
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

// Written returns the number of entries encoded to the output.
func (l *Log) Written() uint64 {
	if l == nil {
		return 0
	}
	return l.written.Load()
}

// Close stops accepting entries, writes everything already buffered, flushes
// and closes the file (standard output is flushed but not closed). Writes
// racing with Close may be dropped and are counted as such. Close is
// idempotent and returns the first write, flush or close error.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.done)
		<-l.exited
		err := l.werr
		if l.closer != nil {
			if cerr := l.closer.Close(); err == nil {
				err = cerr
			}
		}
		l.closeEr = err
	})
	return l.closeEr
}

func (l *Log) run() {
	defer close(l.exited)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	var buf []byte
	dirty := false
	for {
		select {
		case r := <-l.ch:
			buf = l.emit(buf, &r)
			dirty = true
		case <-t.C:
			if dirty {
				l.flush()
				dirty = false
			}
		case <-l.done:
			for {
				select {
				case r := <-l.ch:
					buf = l.emit(buf, &r)
				default:
					l.flush()
					return
				}
			}
		}
	}
}

func (l *Log) flush() {
	if err := l.w.Flush(); err != nil && l.werr == nil {
		l.werr = err
	}
}

// emit encodes one record as a JSON line into the bufio.Writer.
func (l *Log) emit(buf []byte, r *record) []byte {
	buf = appendLine(buf[:0], r)
	if _, err := l.w.Write(buf); err != nil {
		if l.werr == nil {
			l.werr = err
		}
		l.dropped.Add(1)
		return buf
	}
	l.written.Add(1)
	return buf
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
