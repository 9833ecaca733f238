package anycast

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDecide(t *testing.T) {
	ok := []Condition{{Name: "config", OK: true}, {Name: "self_check", OK: true}, {Name: "health", OK: true}}
	failing := []Condition{{Name: "config", OK: true}, {Name: "self_check", OK: false, Detail: "timeout"}, {Name: "health", OK: false}}
	for _, tc := range []struct {
		name       string
		standby    bool
		ctl        Control
		conds      []Condition
		overloaded bool
		want       Decision
	}{
		{"healthy", false, ControlAuto, ok, false, Decision{Announce: true, Reason: ReasonHealthy}},
		{"first failure is the reason", false, ControlAuto, failing, false, Decision{Reason: "self_check_failed"}},
		{"operator withdraw beats health", false, ControlWithdraw, ok, false, Decision{Reason: ReasonOperatorWithdraw}},
		{"standby", true, ControlAuto, ok, false, Decision{Reason: ReasonStandby}},
		{"standby announced", true, ControlAnnounce, ok, false, Decision{Announce: true, Reason: ReasonOperatorAnnounce}},
		{"announce does not override a failure", true, ControlAnnounce, failing, false, Decision{Reason: "self_check_failed"}},
		{"overload", false, ControlAuto, ok, true, Decision{Announce: true, Prepend: 3, Reason: ReasonOverload}},
		{"overloaded but failing", false, ControlAuto, failing, true, Decision{Reason: "self_check_failed"}},
		{"overloaded standby", true, ControlAuto, ok, true, Decision{Reason: ReasonStandby}},
	} {
		got := Decide(tc.standby, tc.ctl, tc.conds, tc.overloaded, 3)
		if got.Announce != tc.want.Announce || got.Prepend != tc.want.Prepend || got.Reason != tc.want.Reason {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if got.Detail == "" {
			t.Errorf("%s: no detail", tc.name)
		}
	}
}

func TestOverloadHysteresis(t *testing.T) {
	o := overload{threshold: 100}
	now := time.Unix(0, 0)
	var count uint64
	step := func(qps uint64) bool {
		now = now.Add(time.Second)
		count += qps
		return o.sample(now, count)
	}
	o.sample(now, 0)
	// Two seconds above and one below: not sustained.
	for _, q := range []uint64{500, 500, 50, 500, 500} {
		if step(q) || o.on {
			t.Fatalf("overloaded after a short burst (rate %v)", o.rate)
		}
	}
	if !step(500) || !o.on {
		t.Fatal("not overloaded after three seconds above the threshold")
	}
	// Hovering just under the threshold (above 80 %) keeps it on.
	for range 10 {
		if step(90); !o.on {
			t.Fatal("overload cleared above the hysteresis band")
		}
	}
	for i := range OverloadOffSamples {
		changed := step(10)
		if i < OverloadOffSamples-1 && (changed || !o.on) {
			t.Fatalf("cleared after %d quiet seconds", i+1)
		}
		if i == OverloadOffSamples-1 && (!changed || o.on) {
			t.Fatalf("still overloaded after %d quiet seconds", OverloadOffSamples)
		}
	}
	// Samples closer than a second apart are not taken.
	before := o.rate
	if o.sample(now.Add(300*time.Millisecond), count+1000); o.rate != before {
		t.Error("a sample taken within a second")
	}
	off := overload{}
	off.sample(now, 0)
	if off.sample(now.Add(time.Second), 1e9) || off.on {
		t.Error("overloaded with no threshold")
	}
}

// fakeSpeaker records what the controller puts on the wire.
type fakeSpeaker struct {
	mu        sync.Mutex
	announced bool
	prepend   int
	calls     int
	fail      error
}

func (f *fakeSpeaker) Announce(p int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return f.fail
	}
	f.announced, f.prepend = true, p
	return nil
}

func (f *fakeSpeaker) Withdraw() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return f.fail
	}
	f.announced, f.prepend = false, 0
	return nil
}

func TestController(t *testing.T) {
	sp := &fakeSpeaker{}
	var mu sync.Mutex
	healthy := true
	now := time.Unix(1000, 0)
	var queries uint64
	c := NewController(sp, Options{
		Prepend:  2,
		QPSAbove: 100,
		Conditions: func() []Condition {
			mu.Lock()
			defer mu.Unlock()
			return []Condition{{Name: "config", OK: true}, {Name: "health", OK: healthy, Detail: "score"}}
		},
		Queries: func() uint64 { return queries },
		Now:     func() time.Time { return now },
	})
	tick := func() { now = now.Add(time.Second); c.Evaluate() }
	tick()
	if !sp.announced {
		t.Fatal("not announced while healthy")
	}
	calls := sp.calls
	tick()
	if sp.calls != calls {
		t.Error("re-announced with nothing changed")
	}
	mu.Lock()
	healthy = false
	mu.Unlock()
	tick()
	if sp.announced {
		t.Fatal("still announced with health failing")
	}
	if st := c.State(); st.Reason != "health_failed" || st.Transitions["health_failed"] != 1 || st.Transitions[ReasonHealthy] != 1 {
		t.Errorf("state %+v", st)
	}
	mu.Lock()
	healthy = true
	mu.Unlock()

	// A failed BGP update is retried at the next evaluation.
	sp.fail = errors.New("boom")
	tick()
	if sp.announced || c.State().Announced {
		t.Fatal("announced although the update failed")
	}
	sp.fail = nil
	tick()
	if !sp.announced || !c.State().Announced {
		t.Fatal("not retried")
	}

	// Overload: three seconds above 100 qps.
	for range 3 {
		queries += 500
		tick()
	}
	if sp.prepend != 2 || c.State().Reason != ReasonOverload {
		t.Fatalf("prepend %d, state %+v", sp.prepend, c.State())
	}
	for range OverloadOffSamples {
		queries += 10
		tick()
	}
	if sp.prepend != 0 || !sp.announced {
		t.Fatalf("after the load: announced %v prepend %d", sp.announced, sp.prepend)
	}

	// Operator control.
	c.SetControl(ControlWithdraw)
	if sp.announced || c.State().Reason != ReasonOperatorWithdraw {
		t.Fatal("operator withdraw ignored")
	}
	c.SetControl(ControlAuto)
	if !sp.announced {
		t.Fatal("auto did not re-announce")
	}

	// Shutdown withdraws for good.
	was, err := c.Shutdown()
	if !was || err != nil || sp.announced {
		t.Fatalf("shutdown: %v %v, announced %v", was, err, sp.announced)
	}
	tick()
	if sp.announced {
		t.Fatal("re-announced after shutdown")
	}
	if was, _ := c.Shutdown(); was {
		t.Error("a second shutdown says it was announced")
	}
}

func TestControllerStandby(t *testing.T) {
	sp := &fakeSpeaker{}
	c := NewController(sp, Options{Standby: true})
	c.Evaluate()
	if sp.announced || c.State().Reason != ReasonStandby {
		t.Fatalf("standby announced: %+v", c.State())
	}
	c.SetControl(ControlAnnounce)
	if !sp.announced || c.State().Reason != ReasonOperatorAnnounce {
		t.Fatalf("announce ignored: %+v", c.State())
	}
	c.SetControl(ControlAuto)
	if sp.announced {
		t.Fatal("auto kept a standby node announced")
	}
	if _, err := ParseControl("sideways"); err == nil {
		t.Error("ParseControl accepted nonsense")
	}
}

// dnsServer answers example.com SOA authoritatively while *up is true and
// drops queries otherwise.
func dnsServer(t *testing.T, up *sync.Map) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if v, _ := up.Load("up"); v != true {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		soa, _ := dns.NewRR("example.com. 60 IN SOA ns1.example.com. h.example.com. 1 2 3 4 5")
		m.Answer = []dns.RR{soa}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestSelfCheckRiseFall(t *testing.T) {
	var up sync.Map
	up.Store("up", true)
	addr := dnsServer(t, &up)
	changes := make(chan bool, 10)
	sc := &SelfCheck{Name: "example.com", Qtype: dns.TypeSOA, Interval: 50 * time.Millisecond, Timeout: 40 * time.Millisecond,
		Rise: 2, Fall: 3, Target: func() (netip.AddrPort, bool) { return addr, true }}
	sc.OnChange = func() { ok, _ := sc.State(); changes <- ok }
	if ok, why := sc.State(); ok || why != "not checked yet" {
		t.Fatalf("before the first check: %v %q", ok, why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sc.Run(ctx)
	wait := func(want bool) time.Duration {
		start := time.Now()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("changed to %v, want %v", got, want)
			}
		case <-time.After(2 * time.Second):
			ok, why := sc.State()
			t.Fatalf("no change to %v (state %v %q)", want, ok, why)
		}
		return time.Since(start)
	}
	wait(true)
	up.Store("up", false)
	if d := wait(false); d < 100*time.Millisecond {
		t.Errorf("failed after %v: fall 3 × 50ms needs at least 100ms", d)
	}
	if _, why := sc.State(); why == "" {
		t.Error("no reason for the failure")
	}
	up.Store("up", true)
	wait(true)

	// A wrong answer type and a missing listener fail too.
	bad := &SelfCheck{Name: "example.com", Qtype: dns.TypeTXT, Timeout: 100 * time.Millisecond,
		Target: func() (netip.AddrPort, bool) { return addr, true }}
	if err := bad.probe(context.Background()); err == nil {
		t.Error("an answer without the asked type passed")
	}
	none := &SelfCheck{Name: "example.com", Qtype: dns.TypeSOA, Timeout: 100 * time.Millisecond,
		Target: func() (netip.AddrPort, bool) { return netip.AddrPort{}, false }}
	if err := none.probe(context.Background()); err == nil {
		t.Error("passed with no listener")
	}
}
