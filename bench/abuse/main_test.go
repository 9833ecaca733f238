package main

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestPacerDue(t *testing.T) {
	start := time.Unix(1000, 0)
	p := pacer{start: start, rate: 20000}
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{-time.Second, 0}, {0, 0}, {time.Millisecond, 20}, {1500 * time.Millisecond, 30000}, {60 * time.Second, 1200000}} {
		if got := p.due(start.Add(c.at)); got != c.want {
			t.Errorf("due(+%v) = %d, want %d", c.at, got, c.want)
		}
	}
	// a low rate: 83 q/s gives 4980 in 60 s
	if got := (pacer{start: start, rate: 83}).due(start.Add(60 * time.Second)); got != 4980 {
		t.Errorf("83 q/s for 60 s: %d", got)
	}
}

func TestPacedRate(t *testing.T) {
	start := time.Now()
	n := paced(2000, start, start.Add(300*time.Millisecond), func(int64) {})
	if n < 560 || n > 600 {
		t.Errorf("2000 q/s for 300 ms sent %d, want about 600", n)
	}
}

func TestTickFor(t *testing.T) {
	for rate, want := range map[float64]time.Duration{20000: time.Millisecond, 83: 12048192 * time.Nanosecond, 2: 50 * time.Millisecond} {
		if got := tickFor(rate); got != want {
			t.Errorf("tickFor(%v) = %v, want %v", rate, got, want)
		}
	}
}

func TestLegitSubnets(t *testing.T) {
	s := legitSubnets(5000)
	if len(s) != 5000 {
		t.Fatalf("%d subnets", len(s))
	}
	seen := map[[3]byte]bool{}
	for _, x := range s {
		if seen[x] {
			t.Fatalf("duplicate %v", x)
		}
		seen[x] = true
		if !publicSlash24(x[0], x[1], x[2]) {
			t.Fatalf("not public: %v", x)
		}
	}
	if again := legitSubnets(5000); again[0] != s[0] || again[4999] != s[4999] {
		t.Error("not the same from run to run")
	}
	// cycling: query i uses subnet i mod N, so 4980 queries (83 q/s, 60 s)
	// use 4980 distinct /24s
	used := map[[3]byte]bool{}
	for i := range 4980 {
		used[s[i%len(s)]] = true
	}
	if len(used) != 4980 {
		t.Errorf("%d distinct in 4980 queries", len(used))
	}
}

func TestQueryWire(t *testing.T) {
	q := newQuery("big.example.com", dns.TypeTXT, 4096, true, false)
	q.setID(0xBEEF)
	q.setECS([3]byte{198, 18, 7})
	var m dns.Msg
	if err := m.Unpack(q.buf); err != nil {
		t.Fatal(err)
	}
	if m.Id != 0xBEEF || m.Question[0].Name != "big.example.com." || m.Question[0].Qtype != dns.TypeTXT || m.RecursionDesired {
		t.Fatalf("bad query %v", &m)
	}
	o := m.IsEdns0()
	if o == nil || o.UDPSize() != 4096 || len(o.Option) != 1 {
		t.Fatalf("bad OPT %v", o)
	}
	e := o.Option[0].(*dns.EDNS0_SUBNET)
	if e.Family != 1 || e.SourceNetmask != 24 || e.Address.String() != "198.18.7.0" {
		t.Fatalf("bad ECS %v", e)
	}

	c := newQuery("big.example.com", dns.TypeTXT, 1232, false, true)
	client := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, server := range [][]byte{nil, make([]byte, 16), nil} {
		c.setCookie(client, server)
		var m dns.Msg
		if err := m.Unpack(c.buf); err != nil {
			t.Fatal(err)
		}
		ck := m.IsEdns0().Option[0].(*dns.EDNS0_COOKIE)
		if want := 16 + 2*len(server); len(ck.Cookie) != want || ck.Cookie[:16] != "0102030405060708" {
			t.Fatalf("cookie %q, want %d hex digits", ck.Cookie, want)
		}
	}
}
