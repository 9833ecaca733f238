package steeringtest

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/servertest"
	"github.com/steer-dns/steer/internal/validatortest"
)

// unboundConf is a recursive resolver on 127.0.0.1:port that sends ECS to
// steer (send-client-subnet) for example.com, a stub zone served by steer.
// max-client-subnet-ipv4 is 32: Unbound's default, 24, would cut the
// clients' /28s to 192.0.2.0/24 before steer sees them, and every Larkbook
// city there would get Pune's answer.
func unboundConf(dir string, port int, steer netip.AddrPort) string {
	return validatortest.UnboundConf(port, dir, "subnetcache iterator", "example.com", steer, "")
}

// TestUnboundForwardsECS runs Unbound as a real recursive resolver in front
// of steer. Clients send their subnet to Unbound, Unbound forwards it to
// steer, and steer's scope lets Unbound's subnet cache keep the answers of
// different cities apart.
// startUnbound runs Unbound (subnet cache, ECS sent to steer for
// example.com) in front of srv until the test ends, and returns where it
// answers once it resolves through steer.
func startUnbound(t *testing.T, srv *servertest.Server) netip.AddrPort {
	t.Helper()
	resolver, _ := startUnboundWith(t, srv, nil)
	return resolver
}

// startUnboundWith is startUnbound with edit applied to the configuration
// text (nil: none); it also returns the configuration file's path.
func startUnboundWith(t *testing.T, srv *servertest.Server, edit func(text string, dir string) string) (netip.AddrPort, string) {
	t.Helper()
	dnstest.NeedTool(t, "unbound")
	dnstest.NeedTool(t, "unbound-checkconf")
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	conf := filepath.Join(dir, "unbound.conf")
	text := unboundConf(dir, port, srv.V4)
	if edit != nil {
		text = edit(text, dir)
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "unbound-checkconf", conf).CombinedOutput(); err != nil {
		t.Fatalf("unbound-checkconf: %v\n%s", err, out)
	}

	cmd := exec.Command("unbound", "-d", "-c", conf)
	var logs dnstest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting unbound: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("unbound's log:\n%s", logs.String())
		}
	})

	resolver := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	// Wait until Unbound answers (it resolves static.example.com through
	// steer, so both are up).
	ready := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("unbound exited: %v\n%s", err, logs.String())
		default:
		}
		m := new(dns.Msg)
		m.SetQuestion("static.example.com.", dns.TypeA)
		c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
		r, _, err := c.Exchange(m, resolver.String())
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			break
		}
		if time.Now().After(ready) {
			t.Fatalf("unbound did not answer in 10s (last: %v %v)\n%s", err, r, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return resolver, conf
}

func TestUnboundForwardsECS(t *testing.T) {
	srv := start(t, cfgOpts{})
	resolver := startUnbound(t, srv)

	ask := func(subnet string) kdigResult {
		t.Helper()
		k := parseKdig(t, dnstest.Kdig(t, resolver, "+rec", "shop.example.com", "A", "+subnet="+subnet))
		if k.status != "NOERROR" || !k.hasFlag("ra") || k.hasFlag("aa") {
			t.Fatalf("unbound +subnet=%s: want a recursive NOERROR\n%s", subnet, k.raw)
		}
		return k
	}
	check := func(subnet string, want ...string) {
		t.Helper()
		k := ask(subnet)
		if len(k.answers) != 1 || k.answers[0].typ != "A" || !contains(want, k.answers[0].rdata) {
			t.Errorf("unbound +subnet=%s: answers %+v, want one A in %v\n%s", subnet, k.answers, want, k.raw)
			return
		}
		if k.answers[0].ttl > 60 || k.answers[0].ttl < 50 {
			t.Errorf("unbound +subnet=%s: TTL %d, want steer's 60 (or a little less from the cache)", subnet, k.answers[0].ttl)
		}
		if !strings.HasPrefix(k.ecs, subnet+"/") {
			t.Errorf("unbound +subnet=%s: CLIENT-SUBNET %q in its answer", subnet, k.ecs)
		}
	}
	// Berlin first: steer answers with scope 28, Unbound caches it for
	// 192.0.2.48/28 only. Then Pune, in the same /24: a cache hit would
	// give Berlin's answer; Unbound must ask steer again.
	check(berlinPfx, euCentral)
	check(punePfx, apSouth)
	// Both again, now from Unbound's subnet cache.
	check(berlinPfx, euCentral)
	check(punePfx, apSouth)
	check(mumbaiPfx, apSouth)
	check(lisbonPfx, euCentral)
	check(columbusPfx, usEast, usEastCanary)
	check("2001:db8:2::/56", apSouth)
	check("2001:db8:4::/56", euCentral)
	// Through the CNAME in the zone.
	k := parseKdig(t, dnstest.Kdig(t, resolver, "+rec", "www.example.com", "A", "+subnet="+berlinPfx))
	if len(k.answers) != 2 || k.answers[1].rdata != euCentral {
		t.Errorf("unbound www +subnet=%s: %+v\n%s", berlinPfx, k.answers, k.raw)
	}
	// No subnet from the client: Unbound sends the client's own address
	// (127.0.0.0/24), unknown to the databases: the fallback order's first.
	k = parseKdig(t, dnstest.Kdig(t, resolver, "+rec", "shop.example.com", "A"))
	if len(k.answers) != 1 || k.answers[0].rdata != apSouth {
		t.Errorf("unbound without +subnet: %+v\n%s", k.answers, k.raw)
	}
}
