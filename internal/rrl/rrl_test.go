package rrl

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

const (
	msec = int64(time.Millisecond)
	sec  = int64(time.Second)
	// t0 is an arbitrary start on the injected clock.
	t0 = 1_000 * sec
)

var (
	resolver = netip.MustParseAddr("192.0.2.53")
	shop     = []byte("shop.example.com.")
)

func newLimiter(t testing.TB, mod func(*Config)) *Limiter {
	t.Helper()
	c := Defaults()
	if mod != nil {
		mod(&c)
	}
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func positive(name []byte) Response {
	return Response{Class: Positive, Name: name, Qtype: 1}
}

// tally counts verdicts.
type tally map[Verdict]int

func (c tally) limited() int { return c[Slip] + c[Drop] + c[LogSlip] + c[LogDrop] }
func (c tally) total() int   { return c[Pass] + c.limited() }

// steady sends n responses r from src evenly spaced at qps starting at
// start, and counts the verdicts.
func steady(l *Limiter, src netip.Addr, r Response, start int64, qps float64, n int) tally {
	c := tally{}
	gap := float64(sec) / qps
	for i := range n {
		c[l.Decide(src, r, start+int64(float64(i)*gap))]++
	}
	return c
}

func TestDefaultsValid(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if l.TableSize() != DefaultTableSize {
		t.Errorf("table size %d", l.TableSize())
	}
}

func TestValidateNamesField(t *testing.T) {
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"ResponsesPerSecond", func(c *Config) { c.ResponsesPerSecond = -1 }},
		{"ResponsesPerSecond", func(c *Config) { c.ResponsesPerSecond = 2_000_000 }},
		{"Window", func(c *Config) { c.Window = 0 }},
		{"Window", func(c *Config) { c.Window = 3601 }},
		{"Slip", func(c *Config) { c.Slip = 11 }},
		{"Slip", func(c *Config) { c.Slip = -1 }},
		{"IPv4Prefix", func(c *Config) { c.IPv4Prefix = 0 }},
		{"IPv4Prefix", func(c *Config) { c.IPv4Prefix = 33 }},
		{"IPv6Prefix", func(c *Config) { c.IPv6Prefix = 129 }},
		{"AllPerSecond", func(c *Config) { c.AllPerSecond = -5 }},
		{"AllPerSecond", func(c *Config) { c.AllPerSecond = 10 }}, // below R=20
		{"TableSize", func(c *Config) { c.TableSize = 100 }},
		{"TableSize", func(c *Config) { c.TableSize = MaxTableSize + 1 }},
		{"Exempt[1]", func(c *Config) { c.Exempt = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), {}} }},
	}
	for _, tt := range tests {
		c := Defaults()
		tt.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v", tt.field, err)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted it", tt.field)
		}
	}
	c := Defaults()
	c.ResponsesPerSecond, c.AllPerSecond, c.TableSize = 0, 0, 0
	if err := c.Validate(); err != nil {
		t.Errorf("all off: %v", err)
	}
	c = Config{}
	err := c.Validate()
	for _, f := range []string{"Window", "IPv4Prefix", "IPv6Prefix"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("zero Config: %v does not name %s", err, f)
		}
	}
}

func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 24 {
		t.Errorf("entry is %d bytes", n)
	}
}

func TestTableSizeRounded(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.TableSize = 1000 })
	if l.TableSize() != 1024 {
		t.Errorf("got %d", l.TableSize())
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		rcode            int
		answer, referral bool
		want             Class
	}{
		{0, true, false, Positive},
		{0, false, false, NoData},
		{0, false, true, Referral},
		{3, false, false, NXDomain},
		{3, true, false, NXDomain}, // a CNAME chain ending in NXDOMAIN
		{2, false, false, Error},
		{5, false, false, Error},
		{1, false, false, Error},
	}
	for _, tt := range tests {
		if got := Classify(tt.rcode, tt.answer, tt.referral); got != tt.want {
			t.Errorf("Classify(%d, %v, %v) = %v, want %v", tt.rcode, tt.answer, tt.referral, got, tt.want)
		}
	}
}

func TestStrings(t *testing.T) {
	for c, want := range []string{"positive", "nodata", "nxdomain", "referral", "error", "class(9)"} {
		if c == 5 {
			c = 9
		}
		if got := Class(c).String(); got != want {
			t.Errorf("Class(%d) = %q", c, got)
		}
	}
	for v, want := range []string{"pass", "slip", "drop", "log-slip", "log-drop"} {
		if got := Verdict(v).String(); got != want {
			t.Errorf("Verdict(%d) = %q", v, got)
		}
	}
	if !Pass.Answer() || Slip.Answer() || Drop.Answer() || !LogSlip.Answer() || !LogDrop.Answer() {
		t.Error("Answer")
	}
	if Pass.Limited() || !Slip.Limited() || !Drop.Limited() || !LogSlip.Limited() || !LogDrop.Limited() {
		t.Error("Limited")
	}
}

func TestNilLimiter(t *testing.T) {
	var l *Limiter
	if v := l.Decide(resolver, positive(shop), t0); v != Pass {
		t.Error(v)
	}
	if s := l.Stats(); s.Total().Passed != 0 {
		t.Error(s)
	}
}

// Exactly R evenly spaced responses a second pass indefinitely, also for a
// rate whose spacing is not a whole number of milliseconds.
func TestExactRatePassesIndefinitely(t *testing.T) {
	for _, r := range []int{20, 7, 3, 1000} {
		l := newLimiter(t, func(c *Config) { c.ResponsesPerSecond, c.AllPerSecond = r, max(r, 1000) })
		n := r * 600 // ten minutes
		c := steady(l, resolver, positive(shop), t0, float64(r), n)
		if c[Pass] != n {
			t.Errorf("R=%d: %d of %d passed: %v", r, c[Pass], n, c)
		}
	}
}

// A rate a little under R passes; one over it is limited (BIND semantics:
// every response, limited ones included, debits the bucket, so a source
// that keeps asking at 2R gets its initial burst and then nothing but
// slips until it slows down).
func TestOverRate(t *testing.T) {
	l := newLimiter(t, nil)
	c := steady(l, resolver, positive(shop), t0, 18, 18*60)
	if c.limited() != 0 {
		t.Errorf("0.9R: %v", c)
	}

	l = newLimiter(t, nil)
	c = steady(l, resolver, positive(shop), t0, 40, 40*60)
	// The bucket starts with R=20 and loses half a response per query: 39
	// pass, all the rest are limited.
	if c[Pass] != 39 {
		t.Errorf("2R for 60 s: %d passed, want 39 (%v)", c[Pass], c)
	}
	// Slip 2: half the limited responses are slipped.
	if d := c[Slip] - c[Drop]; d < 0 || d > 1 {
		t.Errorf("2R slip 2: %v", c)
	}
	s := l.Stats()
	if s.Class[Positive].Passed != 39 || s.Class[Positive].Slipped != uint64(c[Slip]) || s.Class[Positive].Dropped != uint64(c[Drop]) {
		t.Errorf("stats %+v, tally %v", s.Class[Positive], c)
	}
}

// A burst after a long idle gets exactly R responses: the balance is
// capped at +R, however long the bucket earned.
func TestBurstAfterIdle(t *testing.T) {
	l := newLimiter(t, nil)
	burst := func(at int64, size int) int {
		n := 0
		for range size {
			if l.Decide(resolver, positive(shop), at) == Pass {
				n++
			}
		}
		return n
	}
	if n := burst(t0, 100); n != 20 {
		t.Errorf("first burst: %d passed", n)
	}
	if n := burst(t0+3600*sec, 20); n != 20 {
		t.Errorf("burst after an hour: %d passed", n)
	}
	// Half a second after using up its R, the bucket has earned 10.
	if n := burst(t0+3600*sec+500*msec, 100); n != 10 {
		t.Errorf("burst after 0.5 s: %d passed", n)
	}
}

// After a flood drives a bucket to its floor (−Window×R), the source gets
// answers again after Window seconds of silence, not before; asking at R/2
// it takes twice as long. A small excess recovers at once.
func TestWindowRecovery(t *testing.T) {
	for _, w := range []int{1, 15, 60} {
		flooded := func() (*Limiter, int64) {
			l := newLimiter(t, func(c *Config) { c.Window, c.Slip = w, 0 })
			n := 200 * 2 * w // 10R for twice the window
			steady(l, resolver, positive(shop), t0, 200, n)
			return l, t0 + int64(n)*sec/200
		}
		l, stop := flooded()
		if v := l.Decide(resolver, positive(shop), stop+int64(w)*sec-100*msec); v != Drop {
			t.Errorf("window %d: %v just before the window", w, v)
		}
		// Past the window the history is forgotten (BIND): the bucket is
		// full again, however deep it was.
		l, stop = flooded()
		c := steady(l, resolver, positive(shop), stop+int64(w)*sec+100*msec, 1e6, 40)
		if c[Pass] != 20 {
			t.Errorf("window %d: a burst just after the window: %v", w, c)
		}
		// Asking at R/2 earns half a response per query: the floor of
		// −w×R takes 2w seconds to climb.
		l, stop = flooded()
		c = steady(l, resolver, positive(shop), stop, 10, 10*2*w-10)
		if c[Pass] != 0 {
			t.Errorf("window %d: R/2 answered before 2×window: %v", w, c)
		}
		c = steady(l, resolver, positive(shop), stop+int64(2*w+1)*sec, 10, 20)
		if c[Pass] != 20 {
			t.Errorf("window %d: R/2 not answered after 2×window: %v", w, c)
		}
	}

	// 25 at once: 20 pass, 5 limited, balance −5; it takes (5+1)/R = 300
	// ms to answer again, not the window.
	l := newLimiter(t, nil)
	for range 25 {
		l.Decide(resolver, positive(shop), t0)
	}
	if v := l.Decide(resolver, positive(shop), t0+290*msec); v == Pass {
		t.Errorf("small excess at 290 ms: %v", v)
	}
	if v := l.Decide(resolver, positive(shop), t0+350*msec); v != Pass {
		t.Errorf("small excess at 350 ms: %v", v)
	}
}

func limitedSequence(t *testing.T, slip int, class Class, n int) string {
	l := newLimiter(t, func(c *Config) { c.Slip = slip })
	r := Response{Class: class, Name: shop, Qtype: 1}
	for range 20 {
		if v := l.Decide(resolver, r, t0); v != Pass {
			t.Fatalf("slip %d: %v within R", slip, v)
		}
	}
	var b strings.Builder
	for range n {
		switch l.Decide(resolver, r, t0) {
		case Slip:
			b.WriteByte('S')
		case Drop:
			b.WriteByte('D')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

func TestSlip(t *testing.T) {
	tests := []struct {
		slip  int
		class Class
		want  string
	}{
		{2, Positive, "SDSDSDSD"},
		{1, Positive, "SSSSSSSS"},
		{0, Positive, "DDDDDDDD"},
		{3, Positive, "SDDSDDSD"},
		{2, NXDomain, "SDSDSDSD"},
		{1, Error, "DDDDDDDD"}, // errors are never slipped
	}
	for _, tt := range tests {
		if got := limitedSequence(t, tt.slip, tt.class, 8); got != tt.want {
			t.Errorf("slip %d %v: %s, want %s", tt.slip, tt.class, got, tt.want)
		}
	}
}

// The slip counter restarts when the bucket is full again, so a new episode
// of limiting starts with a slip (BIND).
func TestSlipRestartsWithFullBucket(t *testing.T) {
	l := newLimiter(t, nil)
	for range 21 { // 20 pass, the 21st slips
		l.Decide(resolver, positive(shop), t0)
	}
	for range 20 {
		l.Decide(resolver, positive(shop), t0+2*sec)
	}
	if v := l.Decide(resolver, positive(shop), t0+2*sec); v != Slip {
		t.Errorf("first limited of a new episode: %v", v)
	}
}

// ecs24 returns the i-th client /24 (10.x.y.0) and a host in it.
func ecs24(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(i*7 + 1)})
}

// The seed case (abuse notes §2.2): one resolver, 5,000 client /24s, TTL
// 60 s, so 83 q/s for the same name and type, each with a different ECS
// /24 and scope /24. ECS-aware keys answer all of it; the same traffic
// keyed as BIND keys it is mostly limited.
func TestECSSeedCase(t *testing.T) {
	run := func(aware bool, scope int) tally {
		l := newLimiter(t, func(c *Config) { c.ECSAware = aware })
		c := tally{}
		const n, dur = 5000, 60 * sec
		for i := range n {
			r := positive(shop)
			r.ECS, r.Scope = ecs24(i), scope
			c[l.Decide(resolver, r, t0+int64(i)*dur/n)]++
		}
		return c
	}
	if c := run(true, 24); c[Pass] != 5000 {
		t.Errorf("ECS-aware, scope /24: %v", c)
	}
	if c := run(false, 24); c.limited() < 5000*7/10 {
		t.Errorf("not ECS-aware: only %d of 5000 limited (%v)", c.limited(), c)
	}
	// Scope 0: the answer does not depend on the client, one bucket.
	if c := run(true, 0); c.limited() < 5000*7/10 {
		t.Errorf("scope 0: only %d of 5000 limited (%v)", c.limited(), c)
	}
}

// drain uses up the bucket of (src, r) at now and reports the verdict of
// one more response for (src2, r2).
func drain(l *Limiter, src netip.Addr, r Response, src2 netip.Addr, r2 Response, now int64) Verdict {
	for range 20 {
		l.Decide(src, r, now)
	}
	return l.Decide(src2, r2, now)
}

func sameBucket(t *testing.T, mod func(*Config), src netip.Addr, r Response, src2 netip.Addr, r2 Response) bool {
	t.Helper()
	l := newLimiter(t, func(c *Config) {
		c.AllPerSecond = 0
		if mod != nil {
			mod(c)
		}
	})
	return drain(l, src, r, src2, r2, t0).Limited()
}

func TestScopeZeroSharesBucket(t *testing.T) {
	plain := positive(shop)
	a := positive(shop)
	a.ECS = netip.MustParseAddr("10.1.2.0")
	b := positive(shop)
	b.ECS = netip.MustParseAddr("2001:db8:77::")
	if !sameBucket(t, nil, resolver, plain, resolver, a) {
		t.Error("no ECS and ECS with scope 0 differ")
	}
	if !sameBucket(t, nil, resolver, a, resolver, b) {
		t.Error("IPv4 and IPv6 ECS with scope 0 differ")
	}
	a.Scope = 24
	if sameBucket(t, nil, resolver, plain, resolver, a) {
		t.Error("no ECS and ECS with scope 24 share")
	}
}

func TestECSScopeBlocks(t *testing.T) {
	with := func(addr string, scope int) Response {
		r := positive(shop)
		r.ECS, r.Scope = netip.MustParseAddr(addr), scope
		return r
	}
	tests := []struct {
		a, b  Response
		share bool
	}{
		{with("10.1.2.3", 24), with("10.1.2.200", 24), true},
		{with("10.1.2.3", 24), with("10.1.3.3", 24), false},
		{with("10.1.2.0", 16), with("10.1.99.0", 16), true},
		{with("10.1.2.0", 16), with("10.2.2.0", 16), false},
		{with("10.1.2.0", 16), with("10.1.2.0", 24), false}, // a /16 block is not the /24 in it
		{with("10.1.2.0", 40), with("10.1.2.0", 32), true},  // scope capped at the family's length
		{with("2001:db8:1:2::", 48), with("2001:db8:1:ff::", 48), true},
		{with("2001:db8:1:2::", 56), with("2001:db8:1:2ff::", 56), false},
		{with("::ffff:10.1.2.0", 120), with("10.1.2.0", 24), false}, // families differ
	}
	for _, tt := range tests {
		if got := sameBucket(t, nil, resolver, tt.a, resolver, tt.b); got != tt.share {
			t.Errorf("%v/%d and %v/%d: share %v, want %v", tt.a.ECS, tt.a.Scope, tt.b.ECS, tt.b.Scope, got, tt.share)
		}
	}
	// Without ECSAware, ECS is not in the key at all.
	if !sameBucket(t, func(c *Config) { c.ECSAware = false }, resolver, with("10.1.2.3", 24), resolver, with("10.9.9.9", 24)) {
		t.Error("ECSAware off: ECS blocks differ")
	}
}

func TestKeyParts(t *testing.T) {
	other := []byte("other.example.com.")
	r := func(c Class, name []byte, qtype uint16) Response { return Response{Class: c, Name: name, Qtype: qtype} }
	tests := []struct {
		what  string
		a, b  Response
		share bool
	}{
		{"positive, other qtype", r(Positive, shop, 1), r(Positive, shop, 28), false},
		{"positive, other name", r(Positive, shop, 1), r(Positive, other, 1), false},
		{"nodata ignores qtype", r(NoData, shop, 1), r(NoData, shop, 28), true},
		{"nodata, other name", r(NoData, shop, 1), r(NoData, other, 1), false},
		{"nxdomain ignores qtype", r(NXDomain, shop, 1), r(NXDomain, shop, 16), true},
		{"referral ignores qtype", r(Referral, shop, 1), r(Referral, shop, 16), true},
		{"error ignores name and qtype", r(Error, shop, 1), r(Error, other, 16), true},
		{"classes differ", r(Positive, shop, 1), r(NoData, shop, 1), false},
		{"positive vs nxdomain", r(Positive, shop, 1), r(NXDomain, shop, 1), false},
		{"unknown class is error", r(Class(42), shop, 1), r(Error, other, 2), true},
	}
	for _, tt := range tests {
		if got := sameBucket(t, nil, resolver, tt.a, resolver, tt.b); got != tt.share {
			t.Errorf("%s: share %v", tt.what, got)
		}
	}
}

func TestErrorIgnoresECS(t *testing.T) {
	a := Response{Class: Error, ECS: netip.MustParseAddr("10.1.2.0"), Scope: 24}
	b := Response{Class: Error, ECS: netip.MustParseAddr("10.9.9.0"), Scope: 24}
	if !sameBucket(t, nil, resolver, a, resolver, b) {
		t.Error("error responses with different ECS blocks differ")
	}
}

// The aggregate bucket counts every response of a source prefix, whatever
// its name, type, class or ECS, and drops over it even with slip 1.
func TestAggregateIgnoresKey(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.AllPerSecond, c.Slip = 100, 1 })
	for i := range 100 {
		r := Response{Class: Class(i % NumClasses), Name: fmt.Appendf(nil, "n%d.example.com.", i), Qtype: uint16(i), ECS: ecs24(i), Scope: 24}
		if v := l.Decide(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), r, t0); v != Pass {
			t.Fatalf("response %d: %v", i, v)
		}
	}
	if v := l.Decide(netip.MustParseAddr("198.51.100.77"), Response{Class: NoData, Name: []byte("fresh.example.")}, t0); v != Drop {
		t.Errorf("101st: %v", v)
	}
	if v := l.Decide(netip.MustParseAddr("198.51.101.1"), Response{Class: NoData, Name: []byte("fresh.example.")}, t0); v != Pass {
		t.Errorf("another prefix: %v", v)
	}
	if s := l.Stats(); s.AllLimited != 1 || s.Class[NoData].Dropped != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestSourcePrefixes(t *testing.T) {
	r := positive(shop)
	a := netip.MustParseAddr
	tests := []struct {
		x, y  string
		share bool
	}{
		{"192.0.2.1", "192.0.2.254", true},
		{"192.0.2.1", "192.0.3.1", false},
		{"192.0.2.1", "::ffff:192.0.2.9", true}, // v4-mapped is IPv4
		{"2001:db8:0:ff00::1", "2001:db8:0:ffaa::2", true},
		{"2001:db8:0:ff00::1", "2001:db8:0:fe00::1", false},
		{"2001:db8:0:ff00::1", "2001:db8:1:ff00::1", false},
		{"0.0.0.0", "::", false},
	}
	for _, tt := range tests {
		if got := sameBucket(t, nil, a(tt.x), r, a(tt.y), r); got != tt.share {
			t.Errorf("%s and %s: share %v", tt.x, tt.y, got)
		}
	}
	// Other prefix lengths.
	mod := func(c *Config) { c.IPv4Prefix, c.IPv6Prefix = 32, 64 }
	if sameBucket(t, mod, a("192.0.2.1"), r, a("192.0.2.2"), r) {
		t.Error("/32 shares")
	}
	if !sameBucket(t, mod, a("2001:db8::1"), r, a("2001:db8::2"), r) {
		t.Error("/64 differs")
	}
	mod = func(c *Config) { c.IPv4Prefix, c.IPv6Prefix = 20, 60 }
	if !sameBucket(t, mod, a("192.0.16.1"), r, a("192.0.31.2"), r) || sameBucket(t, mod, a("192.0.16.1"), r, a("192.0.32.2"), r) {
		t.Error("/20")
	}
	if !sameBucket(t, mod, a("2001:db8:0:10::"), r, a("2001:db8:0:1f::"), r) || sameBucket(t, mod, a("2001:db8:0:10::"), r, a("2001:db8:0:20::"), r) {
		t.Error("/60")
	}
}

// Every source prefix has its own buckets, also those that share a shard.
func TestSourcesHaveOwnBuckets(t *testing.T) {
	l := newLimiter(t, nil)
	for i := range 2000 {
		src := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
		for range 20 {
			if v := l.Decide(src, positive(shop), t0); v != Pass {
				t.Fatalf("source %v: %v", src, v)
			}
		}
		if v := l.Decide(src, positive(shop), t0); v == Pass {
			t.Fatalf("source %v: 21st passed", src)
		}
	}
}

func TestMasked(t *testing.T) {
	tests := []struct {
		addr string
		bits int
		want string
	}{
		{"192.0.2.255", 24, "192.0.2.0"},
		{"192.0.2.255", 25, "192.0.2.128"},
		{"192.0.2.255", 32, "192.0.2.255"},
		{"192.0.2.255", 0, "0.0.0.0"},
		{"2001:db8:aaaa:bbff:1::1", 56, "2001:db8:aaaa:bb00::"},
		{"2001:db8:aaaa:bbff:1::1", 60, "2001:db8:aaaa:bbf0::"},
		{"2001:db8:aaaa:bbff:1::1", 128, "2001:db8:aaaa:bbff:1::1"},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		m := masked(a, tt.bits)
		var got netip.Addr
		if a.Is4() {
			got = netip.AddrFrom4([4]byte(m[:4]))
		} else {
			got = netip.AddrFrom16(m)
		}
		if got.String() != tt.want {
			t.Errorf("masked(%s, %d) = %s, want %s", tt.addr, tt.bits, got, tt.want)
		}
	}
	if masked(netip.Addr{}, 24) != [16]byte{} {
		t.Error("zero Addr")
	}
}

// A spoofed flood that varies ECS: each response is a new scope block, so
// the per-key buckets never limit it, and only AllPerSecond bounds it:
// never more than AllPerSecond×(seconds+1) answers, all limited ones
// dropped, never slipped.
func TestRandomECSFloodBoundedByAll(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.Slip = 1 })
	rng := rand.New(rand.NewPCG(1, 2))
	const qps, secs = 20_000, 10
	c := tally{}
	for i := range qps * secs {
		r := Response{Class: Positive, Name: []byte("big.example.com."), Qtype: 16, Scope: 24}
		r.ECS = netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0})
		src := netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) // victim /24, any host
		c[l.Decide(src, r, t0+int64(i)*sec/qps)]++
	}
	if c[Pass] > 1000*(secs+1) {
		t.Errorf("flood got %d answers in %d s, over AllPerSecond", c[Pass], secs)
	}
	if c[Slip] != 0 {
		t.Errorf("aggregate limit slipped %d", c[Slip])
	}
	s := l.Stats()
	if s.AllLimited != uint64(c[Drop]) {
		t.Errorf("AllLimited %d, dropped %d", s.AllLimited, c[Drop])
	}

	// Just under AllPerSecond the same flood is answered in full: with
	// scope /24 the per-key buckets multiply by the number of blocks.
	l = newLimiter(t, nil)
	c = tally{}
	for i := range 900 * secs {
		r := Response{Class: Positive, Name: []byte("big.example.com."), Qtype: 16, Scope: 24}
		r.ECS = netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0})
		c[l.Decide(resolver, r, t0+int64(i)*sec/900)]++
	}
	if c.limited() != 0 {
		t.Errorf("900 q/s of distinct blocks: %v", c)
	}
}

// With AllPerSecond off, a random-ECS flood is not limited at all by
// scope-/24 buckets, and with scope 0 (a name that is not steered) it is.
func TestRandomECSScopeZero(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.AllPerSecond = 0 })
	rng := rand.New(rand.NewPCG(3, 4))
	c := tally{}
	for i := range 10_000 {
		r := Response{Class: Positive, Name: shop, Qtype: 1, Scope: 0}
		r.ECS = netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0})
		c[l.Decide(resolver, r, t0+int64(i)*msec)]++
	}
	if c[Pass] > 20+20*10+1 {
		t.Errorf("scope 0 flood: %v", c)
	}
}

func TestExempt(t *testing.T) {
	l := newLimiter(t, func(c *Config) {
		c.Exempt = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("::ffff:203.0.113.0/120"), netip.MustParsePrefix("2001:db8::/32")}
	})
	for _, src := range []string{"192.0.2.53", "::ffff:192.0.2.7", "203.0.113.9", "2001:db8:1::1"} {
		c := steady(l, netip.MustParseAddr(src), positive(shop), t0, 10_000, 5000)
		if c[Pass] != 5000 {
			t.Errorf("%s: %v", src, c)
		}
	}
	if v := drain(l, netip.MustParseAddr("192.0.3.1"), positive(shop), netip.MustParseAddr("192.0.3.1"), positive(shop), t0); v == Pass {
		t.Error("a source outside the exempt prefixes is not limited")
	}
	s := l.Stats()
	if s.Exempt != 20000 || s.Class[Positive].Passed != 20 {
		t.Errorf("stats %+v", s)
	}
}

func TestLogOnly(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.LogOnly = true })
	c := steady(l, resolver, positive(shop), t0, 40, 40*60)
	if c[Pass] != 39 || c[Drop] != 0 || c[Slip] != 0 || c[LogSlip] == 0 || c[LogDrop] == 0 {
		t.Errorf("log-only: %v", c)
	}
	// The aggregate too.
	for i := range 5000 {
		r := Response{Class: Positive, Name: shop, Qtype: 1, Scope: 24, ECS: ecs24(i)}
		if v := l.Decide(netip.MustParseAddr("198.51.100.1"), r, t0); !v.Answer() {
			t.Fatalf("log-only aggregate: %v", v)
		}
	}
	s := l.Stats()
	p := s.Class[Positive]
	if p.Slipped != 0 || p.Dropped != 0 || p.WouldLimit != uint64(c.limited())+4000 || s.AllLimited != 4000 {
		t.Errorf("stats %+v all %d", p, s.AllLimited)
	}
}

// A reordered clock (a goroutine that read the time a little before
// another updated the bucket) counts as no time; a large jump back is a
// clock change and restarts the bucket.
func TestClockReordering(t *testing.T) {
	l := newLimiter(t, nil)
	for range 30 {
		l.Decide(resolver, positive(shop), t0)
	}
	if v := l.Decide(resolver, positive(shop), t0-5*msec); v == Pass {
		t.Errorf("5 ms back: %v", v)
	}
	if v := l.Decide(resolver, positive(shop), t0-3600*sec); v != Pass {
		t.Errorf("an hour back: %v", v)
	}
}

// A full table keeps working: new keys evict old ones, the table does not
// grow, and a source being limited keeps its bucket against a flood of
// distinct keys.
func TestTableFull(t *testing.T) {
	l := newLimiter(t, func(c *Config) { c.TableSize = MinTableSize; c.AllPerSecond = 0 })
	hot := positive(shop)
	for range 25 {
		l.Decide(resolver, hot, t0)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	now := t0
	name := []byte("n00000000.example.com.")
	for i := range 200_000 {
		now += 100_000 // 10,000 q/s
		r := Response{Class: Positive, Name: name, Qtype: 1}
		for d, v := 8, i; d >= 1; d, v = d-1, v/10 {
			name[d] = byte('0' + v%10)
		}
		if v := l.Decide(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 1}), r, now); v != Pass {
			t.Fatalf("new key %d: %v", i, v)
		}
		if i%20 == 0 { // the hot source asks at 500 q/s, far over R
			if v := l.Decide(resolver, hot, now); v == Pass {
				t.Fatalf("hot key passed at %d: its bucket was evicted", i)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if l.TableSize() != MinTableSize {
		t.Errorf("table size %d", l.TableSize())
	}
	s := l.Stats()
	if s.Evictions == 0 {
		t.Error("no evictions counted")
	}
	if got := s.Class[Positive].Passed; got != 20+200_000 {
		t.Errorf("passed %d", got)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("heap grew %d bytes", grew)
	}
	t.Logf("evictions %d of 200000 new keys", s.Evictions)
}

func TestNoAllocs(t *testing.T) {
	for _, logOnly := range []bool{false, true} {
		l := newLimiter(t, func(c *Config) {
			c.LogOnly = logOnly
			c.Exempt = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
		})
		now := t0
		i := 0
		srcs := []netip.Addr{resolver, netip.MustParseAddr("2001:db8::53"), netip.MustParseAddr("203.0.113.1")}
		allocs := testing.AllocsPerRun(10_000, func() {
			i++
			now += 10_000
			r := Response{Class: Class(i % NumClasses), Name: shop, Qtype: 1, ECS: ecs24(i), Scope: 24}
			l.Decide(srcs[i%len(srcs)], r, now)
		})
		if allocs != 0 {
			t.Errorf("log-only %v: %v allocs per Decide", logOnly, allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = l.Stats() }); allocs != 0 {
			t.Errorf("%v allocs per Stats", allocs)
		}
	}
}

// hammer runs f(g, i) for each of `each` calls on each of 8 goroutines
// at once, with a metrics scrape meanwhile, and counts the passes.
func hammer(l *Limiter, each int, f func(g, i int) (netip.Addr, Response)) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range each {
				src, r := f(g, i)
				if l.Decide(src, r, t0) == Pass {
					n++
				}
			}
			mu.Lock()
			passed += n
			mu.Unlock()
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = l.Stats()
		}
	})
	wg.Wait()
	return passed
}

// Concurrent Decides on shared buckets keep exact accounting: of many
// responses for one key at one instant exactly R pass, of many for one
// source exactly AllPerSecond, and the counters add up. Run with -race.
func TestConcurrent(t *testing.T) {
	const each = 2000
	l := newLimiter(t, func(c *Config) { c.AllPerSecond = 0 })
	passed := hammer(l, each, func(g, i int) (netip.Addr, Response) {
		r := positive(shop)
		if i%2 == 1 { // a distinct ECS block
			r.ECS, r.Scope = ecs24(g*each+i), 24
		}
		return resolver, r
	})
	if want := 20 + 8*each/2; passed != want {
		t.Errorf("one key plus distinct blocks: %d passed, want %d", passed, want)
	}
	s := l.Stats()
	tot := s.Total()
	if tot.Passed != uint64(passed) || tot.Passed+tot.Slipped+tot.Dropped != 8*each {
		t.Errorf("counted %+v for %d", tot, 8*each)
	}

	l = newLimiter(t, nil)
	passed = hammer(l, each, func(g, i int) (netip.Addr, Response) {
		return resolver, Response{Class: Positive, Name: shop, Qtype: 1, ECS: ecs24(g*each + i), Scope: 24}
	})
	if passed != 1000 {
		t.Errorf("one source, distinct blocks: %d passed, want AllPerSecond", passed)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		_ = Now()
	}
}

// One key, far over its rate: the limited path.
func BenchmarkDecide(b *testing.B) {
	l := newLimiter(b, nil)
	r := positive(shop)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		l.Decide(resolver, r, now)
	}
}

// randomECS returns n responses with random ECS /24s, scope /24.
func randomECS(n int, seed uint64) []Response {
	rng := rand.New(rand.NewPCG(seed, 1))
	rs := make([]Response, n)
	for i := range rs {
		rs[i] = Response{Class: Positive, Name: shop, Qtype: 1, Scope: 24,
			ECS: netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), 0})}
	}
	return rs
}

// Random ECS blocks from many resolvers: a new bucket (and an eviction
// once the table is full) on almost every call.
func BenchmarkDecideManyKeys(b *testing.B) {
	l := newLimiter(b, nil)
	rs := randomECS(1<<16, 1)
	srcs := make([]netip.Addr, 1<<10)
	for i := range srcs {
		srcs[i] = netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 1})
	}
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		now += 1000
		l.Decide(srcs[i&(len(srcs)-1)], rs[i&(len(rs)-1)], now)
	}
}

// Many goroutines, each a different resolver with random ECS blocks. The
// clock is synthetic (each goroutine's own, so they interleave out of
// order) to measure the table and its locks, not time.Now: see
// BenchmarkNow for that.
func BenchmarkDecideParallel(b *testing.B) {
	l := newLimiter(b, nil)
	var seq sync.Mutex
	next := uint64(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		seq.Lock()
		next++
		g := next
		seq.Unlock()
		rs := randomECS(1<<12, g)
		src := netip.AddrFrom4([4]byte{100, byte(g >> 8), byte(g), 1})
		i := 0
		for pb.Next() {
			i++
			l.Decide(src, rs[i&(len(rs)-1)], t0+int64(i)*1000)
		}
	})
}

// Every goroutine on the same source and key: the worst case for lock
// contention (one shard's mutex for the key, one for the aggregate).
func BenchmarkDecideParallelOneKey(b *testing.B) {
	l := newLimiter(b, nil)
	r := positive(shop)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		for pb.Next() {
			now += 1000
			l.Decide(resolver, r, now)
		}
	})
}

// TestPeek: Peek says what Decide would, and changes nothing.
func TestPeek(t *testing.T) {
	c := Defaults()
	c.ResponsesPerSecond, c.TableSize = 3, MinTableSize
	l, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddr("192.0.2.1")
	r := Response{Class: Positive, Name: []byte("www.example.com."), Qtype: 1}
	for i := range 8 {
		want := l.Peek(src, r, 0)
		for range 5 {
			if again := l.Peek(src, r, 0); again != want {
				t.Fatalf("query %d: peeks disagree: %v then %v", i, want, again)
			}
		}
		before := l.Stats()
		if got := l.Decide(src, r, 0); got != want {
			t.Errorf("query %d: Peek said %v, Decide %v", i, want, got)
		}
		if after := l.Stats(); after.Total() == before.Total() {
			t.Errorf("query %d: Decide counted nothing", i)
		}
	}
	st := l.Stats()
	if tot := st.Total(); tot.Passed != 3 || tot.Slipped+tot.Dropped != 5 {
		t.Errorf("peeks changed the counts: %+v", tot)
	}
	if a := testing.AllocsPerRun(100, func() { l.Peek(src, r, 0) }); a != 0 {
		t.Errorf("Peek allocates %.1f", a)
	}
}

// TestCookieAlwaysSlips: a limited response to a query with a client
// cookie is slipped (BADCOOKIE for the caller), never dropped, even with
// slip 0, but the aggregate cap still drops it.
func TestCookieAlwaysSlips(t *testing.T) {
	for _, slip := range []int{0, 2} {
		c := Defaults()
		c.ResponsesPerSecond, c.Slip, c.AllPerSecond, c.TableSize = 2, slip, 0, MinTableSize
		l, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		src := netip.MustParseAddr("192.0.2.1")
		r := Response{Class: Positive, Name: []byte("www.example.com."), Qtype: 1, Cookie: true}
		var got []Verdict
		for range 6 {
			got = append(got, l.Decide(src, r, 0))
		}
		if fmt.Sprint(got) != "[pass pass slip slip slip slip]" {
			t.Errorf("slip %d: %v", slip, got)
		}
		r.Class = Error
		if v := l.Decide(netip.MustParseAddr("192.0.3.1"), r, 0); v != Pass {
			t.Errorf("error class, first: %v", v)
		}
	}
	c := Defaults()
	c.ResponsesPerSecond, c.AllPerSecond, c.TableSize = 2, 3, MinTableSize
	l, _ := New(c)
	src := netip.MustParseAddr("192.0.2.1")
	var got []Verdict
	for i := range 6 {
		got = append(got, l.Decide(src, Response{Class: Positive, Name: []byte(fmt.Sprintf("n%d.", i)), Qtype: 1, Cookie: true}, 0))
	}
	if fmt.Sprint(got) != "[pass pass pass drop drop drop]" {
		t.Errorf("over all_per_second: %v", got)
	}
}
