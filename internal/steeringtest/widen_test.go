package steeringtest

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/policy"
)

// widenRecord: Mumbai (bom) has every other /24 of 10.16.0.0/18, the rest
// of 10.16.0.0/12 falls to the default (fra), and the /12's neighbours go
// to iad. With bom down the whole /12 is fra.
func widenRecord() string {
	var cidrs []string
	for i := 0; i < 60; i += 2 {
		cidrs = append(cidrs, fmt.Sprintf("10.16.%d.0/24", i))
	}
	return `  - name: mumbai.example.com
    ttl: 4
    pools:
      bom: { address: 203.0.113.110 }
      fra: { address: 198.51.100.120 }
      iad: { address: 192.0.2.130 }
    rules:
      - match: { cidr: [` + strings.Join(cidrs, ", ") + `] }
        pool: bom
      - match: { cidr: [10.0.0.0/12, 10.32.0.0/11] }
        pool: iad
      - default: { pool: fra }
    on_unhealthy: next_rule
`
}

// unboundStats reads Unbound's counters through unbound-control.
func unboundStats(t *testing.T, conf string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "unbound-control", "-c", conf, "stats_noreset").CombinedOutput()
	if err != nil {
		t.Fatalf("unbound-control stats_noreset: %v\n%s", err, out)
	}
	m := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			m[k] = int(n)
		}
	}
	return m
}

// TestUnboundSubnetCacheFollowsHealth: steer behind Unbound's subnet cache,
// 60 client /24s of 10.16.0.0/12. With every pool up each /24 is its own
// scope and misses the cache; with Mumbai down the whole /12 answers fra
// with scope /12 and Unbound asks steer about once; with Mumbai back the
// scopes are the original /24s again and every /24 misses again.
func TestUnboundSubnetCacheFollowsHealth(t *testing.T) {
	t.Parallel() // 10 s of waiting out Unbound's copies: overlaps the other such test
	dnstest.NeedTool(t, "unbound")
	dnstest.NeedTool(t, "unbound-control")
	dnstest.NeedTool(t, "kdig")
	srv := start(t, cfgOpts{extra: widenRecord()})
	policies := func() *policy.Live { return srv.Handler().Snapshot().Live }
	setBom := func(ov policy.PoolOverride) {
		policies().SetHealth(func(netip.Addr, string) bool { return true }, func(record, pool string) policy.PoolOverride {
			if record == "mumbai.example.com." && pool == "bom" {
				return ov
			}
			return policy.PoolAuto
		})
	}
	setBom(policy.PoolAuto)

	cport := dnstest.FreePort(t)
	resolver, conf := startUnboundWith(t, srv, func(text, _ string) string {
		text = strings.Replace(text, "remote-control:\n\tcontrol-enable: no\n",
			fmt.Sprintf("remote-control:\n\tcontrol-enable: yes\n\tcontrol-interface: 127.0.0.1\n\tcontrol-port: %d\n\tcontrol-use-cert: no\n", cport), 1)
		if !strings.Contains(text, "control-enable: yes") {
			t.Fatal("could not enable remote-control in the Unbound configuration")
		}
		return strings.Replace(text, "server:\n", "server:\n\textended-statistics: yes\n", 1)
	})

	var clients []string
	for i := range 60 {
		clients = append(clients, fmt.Sprintf("10.16.%d.0/24", i))
	}
	// through asks Unbound for every client and returns how many of the
	// 60 it could not answer from its subnet cache (it asked steer), and
	// the addresses it answered.
	through := func() (misses int, answers map[string]int) {
		t.Helper()
		before := unboundStats(t, conf)
		answers = map[string]int{}
		c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
		for _, cl := range clients {
			m := ecsQuery("mumbai.example.com.", dns.TypeA, cl)
			m.RecursionDesired = true
			r, _, err := c.Exchange(m, resolver.String())
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("unbound, client %s: %v %v", cl, err, r)
			}
			answers[r.Answer[0].(*dns.A).A.String()]++
		}
		after := unboundStats(t, conf)
		// Answers from the subnet cache count as main-cache misses too.
		misses = after["total.num.cachemiss"] - before["total.num.cachemiss"] -
			(after["num.query.subnet_cache"] - before["num.query.subnet_cache"])
		return misses, answers
	}
	// direct asks steer with kdig for every client's scope.
	direct := func() (scopes []string, answers map[string]int) {
		t.Helper()
		answers = map[string]int{}
		for _, cl := range clients {
			k := parseKdig(t, dnstest.Kdig(t, srv.V4, "mumbai.example.com", "A", "+subnet="+cl))
			if k.status != "NOERROR" || len(k.answers) != 1 {
				t.Fatalf("kdig +subnet=%s: %s", cl, k.raw)
			}
			scopes = append(scopes, k.ecs)
			answers[k.answers[0].rdata]++
		}
		return scopes, answers
	}
	expire := func() { time.Sleep(5 * time.Second) } // the record's TTL is 4

	// Phase 1: every pool up.
	orig, ans := direct()
	for i, s := range orig {
		if s != clients[i]+"/24" {
			t.Fatalf("all up: %s has scope %s, want /24", clients[i], s)
		}
	}
	if ans["203.0.113.110"] != 30 || ans["198.51.100.120"] != 30 {
		t.Fatalf("all up: answers %v, want 30 bom and 30 fra", ans)
	}
	misses1, ans1 := through()
	t.Logf("all up: %d of 60 missed Unbound's subnet cache, answers %v", misses1, ans1)
	if misses1 != 60 {
		t.Errorf("all up: %d misses, want 60", misses1)
	}

	// Phase 2: Mumbai down.
	setBom(policy.PoolDown)
	expire()
	scopes, ans := direct()
	for i, s := range scopes {
		if s != clients[i]+"/12" {
			t.Fatalf("bom down: %s has scope %s, want /12", clients[i], s)
		}
	}
	if ans["198.51.100.120"] != 60 {
		t.Fatalf("bom down: answers %v, want fra for all 60", ans)
	}
	// explain says so, from what to what.
	rep, err := explain.Run(srv.Handler(), explain.Request{Name: "mumbai.example.com", Qtype: dns.TypeA,
		ECS: netip.MustParsePrefix("10.16.3.0/24"), From: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steer) != 1 || rep.Steer[0].Widened == nil {
		t.Fatalf("bom down: explain does not say the scope was widened\n%s", rep.Text())
	}
	if w := rep.Steer[0].Widened; w.From != 24 || w.To != 12 || w.Network != "10.16.0.0/12" || strings.Join(w.Unusable, ",") != "bom" {
		t.Errorf("bom down: explain says %+v, want /24 to /12 over 10.16.0.0/12 with bom unusable", w)
	}
	if txt := rep.Text(); !strings.Contains(txt, "scope: /24 widened to /12 by health") {
		t.Errorf("bom down: explain's text does not say how the scope widened:\n%s", txt)
	}
	misses2, ans2 := through()
	t.Logf("bom down: %d of 60 missed Unbound's subnet cache, answers %v", misses2, ans2)
	if misses2 > 2 || ans2["198.51.100.120"] != 60 {
		t.Errorf("bom down: %d misses (want 1: the /12 scope covers all 60), answers %v", misses2, ans2)
	}

	// Phase 3: Mumbai back.
	setBom(policy.PoolAuto)
	expire()
	back, ans := direct()
	for i := range back {
		if back[i] != orig[i] {
			t.Fatalf("bom back: %s has scope %s, was %s", clients[i], back[i], orig[i])
		}
	}
	if ans["203.0.113.110"] != 30 {
		t.Fatalf("bom back: answers %v, want 30 bom", ans)
	}
	misses3, ans3 := through()
	t.Logf("bom back: %d of 60 missed Unbound's subnet cache, answers %v", misses3, ans3)
	if misses3 != 60 || ans3["203.0.113.110"] != 30 {
		t.Errorf("bom back: %d misses, answers %v, want 60 and 30 bom", misses3, ans3)
	}
}
