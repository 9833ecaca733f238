package rum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"
)

// Defaults of Limits' zero fields.
const (
	DefaultMaxRTT     = 60 * time.Second
	DefaultMaxSkew    = time.Minute
	DefaultMaxAge     = time.Hour
	DefaultMaxBytes   = 1 << 20
	DefaultMaxBeacons = 10000
	// MaxListed is how many bad beacons a rejection lists.
	MaxListed = 20
)

// Rejection reasons, the label values of steer_rum_beacons_rejected_total.
const (
	ReasonMalformed = "malformed"    // not a JSON object of the beacon's fields
	ReasonClient    = "client"       // client neither an address nor a subnet
	ReasonSite      = "unknown_site" // site names no configured site or pool
	ReasonRTT       = "rtt"          // rtt_ms missing, <= 0, or above MaxRTT
	ReasonFuture    = "future"       // time later than now + MaxSkew
	ReasonOld       = "too_old"      // time earlier than now - MaxAge
	ReasonBatch     = "batch"        // a good beacon of a batch rejected for its bad ones
	ReasonOversized = "oversized"    // the batch exceeds MaxBytes or MaxBeacons (counted once per batch)
)

// Limits are what the intake accepts.
type Limits struct {
	// Sites are the site and pool names beacons may name.
	Sites map[string]bool
	// MaxRTT is the largest plausible RTT (default DefaultMaxRTT).
	MaxRTT time.Duration
	// MaxSkew is how far in the future a beacon's time may be (clocks
	// differ; default DefaultMaxSkew).
	MaxSkew time.Duration
	// MaxAge is how old a beacon may be (default DefaultMaxAge).
	MaxAge time.Duration
	// MaxBytes and MaxBeacons bound one batch (defaults DefaultMaxBytes,
	// DefaultMaxBeacons).
	MaxBytes   int64
	MaxBeacons int
}

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxRTT <= 0 {
		l.MaxRTT = DefaultMaxRTT
	}
	if l.MaxSkew <= 0 {
		l.MaxSkew = DefaultMaxSkew
	}
	if l.MaxAge <= 0 {
		l.MaxAge = DefaultMaxAge
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxBeacons <= 0 {
		l.MaxBeacons = DefaultMaxBeacons
	}
	return l
}

// BadBeacon is one rejected beacon: where it is in the batch (Line is the
// line of a JSON-lines batch, or the 1-based position in a JSON array)
// and why.
type BadBeacon struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"` // one of the Reason constants
	Detail string `json:"detail"`
}

func (b BadBeacon) String() string { return fmt.Sprintf("line %d: %s", b.Line, b.Detail) }

// BatchError rejects a whole batch: a batch is all or nothing, so a
// sender that retries after fixing its bad lines never double-counts the
// good ones. Bad lists the bad beacons, up to MaxListed; NBad counts them
// all.
type BatchError struct {
	Oversized bool // the batch exceeds a size limit (HTTP 413)
	Msg       string
	Bad       []BadBeacon
	NBad      int
	NGood     int
	Reasons   map[string]int // bad beacons by reason, all of them
}

func (e *BatchError) Error() string {
	if len(e.Bad) == 0 {
		return e.Msg
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d bad beacons, nothing applied: ", e.NBad)
	for i, b := range e.Bad {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(b.String())
	}
	if e.NBad > len(e.Bad) {
		fmt.Fprintf(&sb, "; and %d more", e.NBad-len(e.Bad))
	}
	return sb.String()
}

// wire is a beacon as posted.
type wire struct {
	Client string          `json:"client"`
	Site   string          `json:"site"`
	RTTms  *float64        `json:"rtt_ms"`
	Time   json.RawMessage `json:"time"`
}

// Parse reads a batch, a JSON array of beacon objects or one object per
// line (JSON lines; blank lines are skipped), checks every beacon against
// l at now, and appends the good ones to dst, their clients truncated.
// A beacon without a client gets relay's (the address the batch came
// from). Any bad beacon rejects the batch: Parse then returns a
// *BatchError naming each bad one by line.
func Parse(dst []Beacon, data []byte, relay netip.Addr, l Limits, now time.Time) ([]Beacon, error) {
	l = l.WithDefaults()
	if int64(len(data)) > l.MaxBytes {
		return dst, &BatchError{Oversized: true, Msg: fmt.Sprintf("batch of %d bytes exceeds the limit of %d", len(data), l.MaxBytes)}
	}
	var relayP netip.Prefix
	if relay.IsValid() {
		relayP = Truncate(netip.PrefixFrom(relay, relay.BitLen()))
	}
	p := parser{l: l, now: now, relay: relayP, start: len(dst)}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return dst, &BatchError{Msg: "malformed JSON array: " + err.Error(),
				Bad: []BadBeacon{{Line: 1, Reason: ReasonMalformed, Detail: "malformed JSON array: " + err.Error()}}, NBad: 1,
				Reasons: map[string]int{ReasonMalformed: 1}}
		}
		if len(items) > l.MaxBeacons {
			return dst, p.tooMany(len(items))
		}
		for i, it := range items {
			dst = p.one(dst, i+1, it)
		}
	} else {
		n := 0
		for line := 1; len(data) > 0; line++ {
			var ln []byte
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				ln, data = data[:i], data[i+1:]
			} else {
				ln, data = data, nil
			}
			ln = bytes.TrimSpace(ln)
			if len(ln) == 0 {
				continue
			}
			if n++; n > l.MaxBeacons {
				return dst[:p.start], p.tooMany(n)
			}
			dst = p.one(dst, line, ln)
		}
	}
	if p.err.NBad > 0 {
		p.err.NGood = len(dst) - p.start
		return dst[:p.start], &p.err
	}
	if len(dst) == p.start {
		return dst, &BatchError{Msg: "the batch holds no beacons"}
	}
	return dst, nil
}

type parser struct {
	l     Limits
	now   time.Time
	relay netip.Prefix
	start int
	err   BatchError
	w     wire
}

func (p *parser) tooMany(n int) *BatchError {
	return &BatchError{Oversized: true, Msg: fmt.Sprintf("batch of more than %d beacons exceeds the limit of %d", n-1, p.l.MaxBeacons)}
}

func (p *parser) bad(line int, reason, format string, args ...any) {
	p.err.NBad++
	if p.err.Reasons == nil {
		p.err.Reasons = map[string]int{}
	}
	p.err.Reasons[reason]++
	if len(p.err.Bad) < MaxListed {
		p.err.Bad = append(p.err.Bad, BadBeacon{Line: line, Reason: reason, Detail: fmt.Sprintf(format, args...)})
	}
}

// one checks the beacon at line and appends it to dst when good.
func (p *parser) one(dst []Beacon, line int, raw []byte) []Beacon {
	w := &p.w
	*w = wire{}
	if err := json.Unmarshal(raw, w); err != nil {
		p.bad(line, ReasonMalformed, "malformed beacon: %v", err)
		return dst
	}
	b := Beacon{Client: p.relay, Site: w.Site}
	if w.Client != "" {
		c, ok := parseClient(w.Client)
		if !ok {
			// The value is not echoed: it may be an address.
			p.bad(line, ReasonClient, "bad client (want an IP address or subnet)")
			return dst
		}
		b.Client = c
	}
	if !b.Client.IsValid() {
		p.bad(line, ReasonClient, "no client and no relay address")
		return dst
	}
	b.Client = Truncate(b.Client)
	if !p.l.Sites[w.Site] {
		if w.Site == "" {
			p.bad(line, ReasonSite, "missing site")
		} else {
			p.bad(line, ReasonSite, "unknown site %.64q", w.Site)
		}
		return dst
	}
	switch {
	case w.RTTms == nil:
		p.bad(line, ReasonRTT, "missing rtt_ms")
		return dst
	case !(*w.RTTms > 0) || math.IsInf(*w.RTTms, 0):
		p.bad(line, ReasonRTT, "rtt_ms %v is not > 0", *w.RTTms)
		return dst
	case *w.RTTms > float64(p.l.MaxRTT)/float64(time.Millisecond):
		p.bad(line, ReasonRTT, "rtt_ms %v is above the limit of %v", *w.RTTms, p.l.MaxRTT)
		return dst
	}
	b.RTTms = *w.RTTms
	t, err := parseTime(w.Time)
	switch {
	case err != nil:
		p.bad(line, ReasonMalformed, "bad time: %v", err)
		return dst
	case t.IsZero():
		t = p.now
	case t.After(p.now.Add(p.l.MaxSkew)):
		p.bad(line, ReasonFuture, "time %s is more than %v in the future", t.UTC().Format(time.RFC3339), p.l.MaxSkew)
		return dst
	case t.Before(p.now.Add(-p.l.MaxAge)):
		p.bad(line, ReasonOld, "time %s is more than %v old", t.UTC().Format(time.RFC3339), p.l.MaxAge)
		return dst
	}
	b.Time = t
	return append(dst, b)
}

// parseClient reads an address or a subnet.
func parseClient(s string) (netip.Prefix, bool) {
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		return p, err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// parseTime reads a beacon's time: an RFC 3339 string, or a number of
// Unix milliseconds (what JavaScript's Date.now() gives). Absent is the
// zero time (the beacon then counts as measured on arrival).
func parseTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%.40q is not RFC 3339", s)
		}
		return t, nil
	}
	var ms float64
	if err := json.Unmarshal(raw, &ms); err != nil || ms <= 0 || ms > 1e15 {
		return time.Time{}, fmt.Errorf("%.40s is neither RFC 3339 nor Unix milliseconds", raw)
	}
	return time.UnixMilli(int64(ms)), nil
}

// AddBatch adds beacons that Parse accepted, under one lock. It skips
// any that Add would refuse.
func (s *Store) AddBatch(bs []Beacon) (added int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range bs {
		if p, err := check(&bs[i]); err == nil {
			s.add(p, &bs[i])
			added++
		}
	}
	return added
}
