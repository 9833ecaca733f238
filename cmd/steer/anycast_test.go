package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/birdtest"
	"github.com/steer-dns/steer/internal/dnstest"
)

const (
	anycastV4 = "192.0.2.0/24"
	anycastV6 = "2001:db8:53::/48"
)

// anycastZone is example.com with the name the self-check asks for
// (probe.example.com TXT) when probe is true.
func anycastZone(serial int, probe bool) string {
	z := zoneText(serial, "x")
	if probe {
		z += "probe TXT \"anycast self-check\"\n"
	}
	return z
}

// anycastNode is a steer process with anycast and its admin API.
type anycastNode struct {
	*process
	dns, api string
	dir      string
}

func (n *anycastNode) call(t *testing.T, method, path string) (int, string) {
	t.Helper()
	return apiCall(t, n.api, "s3cret", method, path, "", "")
}

// answers reports whether the node answers a DNS query for its zone.
func (n *anycastNode) answers() bool {
	r, err := query(n.dns, "example.com.", dns.TypeSOA)
	return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1
}

// startAnycastNode writes a config peering with b and starts steer. extra
// is added to the anycast section; records (with health checks) go at the
// top level.
func startAnycastNode(t *testing.T, b *birdtest.BIRD, anycastExtra, topExtra, password string) *anycastNode {
	t.Helper()
	dir := t.TempDir()
	n := &anycastNode{dir: dir,
		dns: fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t)),
		api: fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))}
	writeAtomic(t, filepath.Join(dir, "token"), "s3cret\n")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), anycastZone(1, true))
	peerExtra := ""
	if password != "" {
		writeAtomic(t, filepath.Join(dir, "bgp.pw"), password+"\n")
		peerExtra = ", password_file: bgp.pw"
	}
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
zones:
  - origin: example.com
    file: example.com.zone
%s
anycast:
  router_id: 198.51.100.1
  local_as: 64512
  prefixes: [%s, %s]
  next_hop_v4: self
  next_hop_v6: 2001:db8:53::1
  peers:
    - { address: %s, port: %d, remote_as: %d, local_address: %s, hold_time: 9s, connect_retry: 1s%s }
  self_check: { name: probe.example.com, type: TXT, interval: 1s, timeout: 500ms, rise: 2, fall: 2 }
  withdraw_below: 0.8
%s
`, n.dns, n.api, topExtra, anycastV4, anycastV6, birdtest.Addr, b.Port, birdtest.AS, birdtest.Speaker, peerExtra, anycastExtra))
	n.process = startSteer(t, filepath.Join(dir, "steer.yaml"))
	return n
}

// announced reports whether BIRD has both prefixes with AS path path.
func announced(t *testing.T, b *birdtest.BIRD, path string) func() bool {
	return func() bool {
		r := b.Routes(t)
		return len(r) == 2 && r[anycastV4] == path && r[anycastV6] == path
	}
}

func withdrawn(t *testing.T, b *birdtest.BIRD) func() bool {
	return func() bool { return len(b.Routes(t)) == 0 }
}

// timeUntil waits up to limit for cond and returns how long it took.
func timeUntil(t *testing.T, limit time.Duration, what string, cond func() bool, logs ...func() string) time.Duration {
	t.Helper()
	start := time.Now()
	dnstest.WaitFor(t, limit, what, cond, logs...)
	return time.Since(start)
}

// TestAnycastWithBIRD runs steer against a real BGP peer (BIRD 2 as a
// route collector) and checks everything from BIRD's own view: both
// prefixes learned with AS path 64512; a self-check failure (the zone
// stops serving the probed name after a reload) and a health score below
// withdraw_below (a TCP health target closes) each withdraw within
// interval × fall + 2 s, and recovery re-announces; overload prepends;
// the admin API withdraws and returns to auto; SIGTERM withdraws before
// the DNS listener closes.
func TestAnycastWithBIRD(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
	b := birdtest.Start(t, 64512, "")

	// A real TCP health target on another loopback address.
	hcPort := dnstest.FreePort(t, "127.0.0.5")
	hcAddr := fmt.Sprintf("127.0.0.5:%d", hcPort)
	var hcMu sync.Mutex
	var hcLn net.Listener
	listen := func() {
		t.Helper()
		l, err := net.Listen("tcp", hcAddr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		hcMu.Lock()
		hcLn = l
		hcMu.Unlock()
	}
	listen()
	t.Cleanup(func() { hcMu.Lock(); hcLn.Close(); hcMu.Unlock() })

	n := startAnycastNode(t, b, `  overload: { qps_above: 300, prepend: 3 }
  drain: 2s`, fmt.Sprintf(`health_checks:
  tcp: { type: tcp, port: %d, interval: 200ms, timeout: 100ms, rise: 2, fall: 2 }
records:
  - name: shop.example.com
    ttl: 30
    pools:
      site: { address: 127.0.0.5, health_check: tcp }
    rules:
      - default: { pool: site }`, hcPort), "")
	started := time.Now()
	dnstest.WaitFor(t, 15*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log, b.Log)
	t.Logf("announced %v after steer said it was serving", time.Since(started).Round(time.Millisecond))

	// The status and metrics say so.
	code, body := n.call(t, "GET", "/v1/anycast")
	var st struct {
		Announced bool   `json:"announced"`
		Reason    string `json:"reason"`
		Peers     []struct {
			State string `json:"state"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("GET /v1/anycast: %d %s", code, body)
	}
	if !st.Announced || st.Reason != "healthy" || len(st.Peers) != 1 || st.Peers[0].State != "established" {
		t.Errorf("GET /v1/anycast: %s", body)
	}
	if _, body := n.call(t, "GET", "/v1/status"); !strings.Contains(body, `"anycast"`) || !strings.Contains(body, `"announced": true`) {
		t.Errorf("/v1/status has no anycast part: %s", body)
	}
	_, metrics := n.call(t, "GET", "/metrics")
	for _, want := range []string{
		`steer_anycast_peer_up{peer="127.0.53.1"} 1`,
		`steer_anycast_peer_session_state{peer="127.0.53.1",state="established"} 1`,
		`steer_anycast_prefixes_announced 2`,
		`steer_anycast_transitions_total{reason="healthy"} 1`,
		`steer_anycast_last_transition{reason="healthy"} 1`,
		`steer_anycast_peer_uptime_seconds{peer="127.0.53.1"}`,
		`steer_anycast_health_score 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The zone stops serving the probed name: the self-check fails and
	// BIRD loses the routes within interval × fall + 2 s.
	limit := 2*time.Second + 2*time.Second
	writeAtomic(t, filepath.Join(n.dir, "example.com.zone"), anycastZone(2, false))
	n.cmd.Process.Signal(syscall.SIGHUP)
	took := timeUntil(t, limit+5*time.Second, "the route withdrawn", withdrawn(t, b), b.Dump, n.log)
	t.Logf("self-check failing → withdrawn from BIRD after %v (limit %v)", took.Round(time.Millisecond), limit)
	if took > limit {
		t.Errorf("withdrawn after %v; want at most %v", took, limit)
	}
	// The route leaves BIRD a moment before the line is written (a loaded
	// run once read the log in between).
	if !waitUntil(2*time.Second, func() bool { return strings.Contains(n.log(), "reason=self_check_failed") }) {
		t.Errorf("the withdrawal's reason is not logged:\n%s", n.log())
	}
	if !n.answers() {
		t.Error("the node stopped answering for its zone")
	}
	writeAtomic(t, filepath.Join(n.dir, "example.com.zone"), anycastZone(3, true))
	n.cmd.Process.Signal(syscall.SIGHUP)
	took = timeUntil(t, 10*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log)
	t.Logf("self-check passing again → re-announced to BIRD after %v", took.Round(time.Millisecond))

	// The health target closes: score 0 < 0.8 → withdrawn; back → re-announced.
	hcMu.Lock()
	hcLn.Close()
	hcMu.Unlock()
	hlimit := 2*200*time.Millisecond + 100*time.Millisecond + 2*time.Second
	took = timeUntil(t, hlimit+5*time.Second, "the route withdrawn", withdrawn(t, b), b.Dump, n.log)
	t.Logf("health score below 0.8 → withdrawn from BIRD after %v (limit %v)", took.Round(time.Millisecond), hlimit)
	if took > hlimit {
		t.Errorf("withdrawn after %v; want at most %v", took, hlimit)
	}
	if !waitUntil(2*time.Second, func() bool { return strings.Contains(n.log(), "reason=health_failed") }) {
		t.Errorf("the withdrawal's reason is not logged:\n%s", n.log())
	}
	listen()
	took = timeUntil(t, 10*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log)
	t.Logf("health target back → re-announced to BIRD after %v", took.Round(time.Millisecond))

	// Overload: above 300 qps for a few seconds → AS path prepended
	// three times (BIRD sees 4 × 64512); load stops → back to one.
	var stopLoad atomic.Bool
	var loadWG sync.WaitGroup
	// Paced well above the threshold but far from saturating the node,
	// so the self-check keeps passing on a busy CI machine.
	for range 2 {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			c := &dns.Client{Timeout: time.Second}
			m := new(dns.Msg)
			m.SetQuestion("www.example.com.", dns.TypeA)
			for !stopLoad.Load() {
				c.Exchange(m, n.dns)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	loaded := time.Now()
	dnstest.WaitFor(t, 15*time.Second, "the route announced with 3 prepends", announced(t, b, "64512 64512 64512 64512"), b.Dump, n.log)
	t.Logf("overload → prepended path at BIRD after %v of load", time.Since(loaded).Round(time.Millisecond))
	_, body = n.call(t, "GET", "/v1/anycast")
	var ov struct {
		Overloaded bool     `json:"overloaded"`
		ASPath     []uint32 `json:"as_path"`
		Reason     string   `json:"reason"`
		QPS        float64  `json:"qps"`
	}
	if err := json.Unmarshal([]byte(body), &ov); err != nil || !ov.Overloaded || len(ov.ASPath) != 4 || ov.Reason != "overload" {
		t.Errorf("GET /v1/anycast while overloaded: %s", body)
	}
	t.Logf("measured load %.0f qps (qps_above 300)", ov.QPS)
	if _, m := n.call(t, "GET", "/metrics"); !strings.Contains(m, "steer_anycast_as_path_prepend 3") {
		t.Error("metrics lack steer_anycast_as_path_prepend 3")
	}
	stopLoad.Store(true)
	loadWG.Wait()
	took = timeUntil(t, 15*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log)
	t.Logf("load gone → prepend removed after %v", took.Round(time.Millisecond))
	if routes := b.Routes(t); len(routes) != 2 {
		t.Errorf("routes while changing the prepend: %v", routes)
	}

	// Manual control: withdraw, then auto.
	if code, body := n.call(t, "POST", "/v1/anycast/withdraw"); code != 200 || !strings.Contains(body, `"operator_withdraw"`) {
		t.Fatalf("POST withdraw: %d %s", code, body)
	}
	took = timeUntil(t, 5*time.Second, "the route withdrawn", withdrawn(t, b), b.Dump, n.log)
	t.Logf("POST /v1/anycast/withdraw → withdrawn from BIRD after %v", took.Round(time.Millisecond))
	if code, _ := n.call(t, "POST", "/v1/anycast/auto"); code != 200 {
		t.Fatalf("POST auto: %d", code)
	}
	took = timeUntil(t, 5*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log)
	t.Logf("POST /v1/anycast/auto → re-announced to BIRD after %v", took.Round(time.Millisecond))
	if code, _ := n.call(t, "POST", "/v1/anycast/frobnicate"); code != 404 && code != 405 {
		t.Errorf("POST /v1/anycast/frobnicate: %d", code)
	}

	// SIGTERM: BIRD loses the routes first; DNS still answers after that,
	// for the drain period; then the process exits 0.
	n.cmd.Process.Signal(syscall.SIGTERM)
	term := time.Now()
	dnstest.WaitFor(t, 3*time.Second, "the route withdrawn", withdrawn(t, b), b.Dump, n.log)
	gone := time.Since(term)
	if !n.answers() {
		t.Fatalf("DNS stopped answering before the drain period ended (%v after SIGTERM)\n%s", time.Since(term), n.log())
	}
	t.Logf("SIGTERM → withdrawn from BIRD after %v; DNS still answered at %v", gone.Round(time.Millisecond), time.Since(term).Round(time.Millisecond))
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatalf("steer exited with %v\n%s", err, n.log())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("steer did not exit after SIGTERM\n%s", n.log())
	}
	exited := time.Since(term)
	if exited < 2*time.Second {
		t.Errorf("exited %v after SIGTERM; the drain period is 2s", exited)
	}
	if n.answers() {
		t.Error("DNS still answers after exit")
	}
	t.Logf("exited %v after SIGTERM", exited.Round(time.Millisecond))
}

// TestAnycastStandby: a standby node peers but announces nothing until
// POST /v1/anycast/announce; POST /v1/anycast/auto returns it to standby.
func TestAnycastStandby(t *testing.T) {
	t.Parallel() // waits on processes and peers: overlaps the other such tests
	b := birdtest.Start(t, 64512, "md5-s3cret")
	n := startAnycastNode(t, b, "  mode: standby", "", "md5-s3cret")
	dnstest.WaitFor(t, 10*time.Second, "an established standby session", func() bool {
		_, body := n.call(t, "GET", "/v1/anycast")
		return strings.Contains(body, `"state": "established"`) && strings.Contains(body, `"reason": "standby"`)
	}, func() string { _, body := n.call(t, "GET", "/v1/anycast"); return body }, n.log)
	// Established and the self-check long passed (rise 2 × 1 s): still
	// nothing at BIRD.
	time.Sleep(2500 * time.Millisecond)
	if r := b.Routes(t); len(r) != 0 {
		t.Fatalf("a standby node announced %v", r)
	}
	// A reload does not change the anycast settings, and says so.
	cfg := filepath.Join(n.dir, "steer.yaml")
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, cfg, strings.Replace(string(raw), "mode: standby", "mode: active", 1))
	n.cmd.Process.Signal(syscall.SIGHUP)
	dnstest.WaitFor(t, 5*time.Second, "strings.Contains(n.log(), `takes effect at the next restart\" setting=\"anycast`)", func() bool { return strings.Contains(n.log(), `takes effect at the next restart" setting="anycast`) }, n.log)
	time.Sleep(500 * time.Millisecond)
	if r := b.Routes(t); len(r) != 0 {
		t.Fatalf("a reload made a standby node announce %v", r)
	}
	code, body := n.call(t, "POST", "/v1/anycast/announce")
	var st struct {
		Reason string   `json:"reason"`
		ASPath []uint32 `json:"as_path"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 || st.Reason != "operator_announce" {
		t.Fatalf("POST announce: %d %s", code, body)
	}
	if len(st.ASPath) != 1 || st.ASPath[0] != 64512 {
		t.Errorf("the status's AS path is %v, want [64512] (what the peer sees): %s", st.ASPath, body)
	}
	took := timeUntil(t, 5*time.Second, "the route announced", announced(t, b, "64512"), b.Dump, n.log)
	t.Logf("standby: POST /v1/anycast/announce → at BIRD after %v", took.Round(time.Millisecond))
	if code, _ := n.call(t, "POST", "/v1/anycast/auto"); code != 200 {
		t.Fatalf("POST auto: %d", code)
	}
	dnstest.WaitFor(t, 5*time.Second, "the route withdrawn", withdrawn(t, b), b.Dump, n.log)
	// Without announcements, SIGTERM does not wait for a drain period.
	start := time.Now()
	n.stop(t)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a withdrawn node took %v to stop", d)
	}
}

// TestAnycastCheck: steer check rejects bad anycast settings with
// file:line and the reason.
func TestAnycastCheck(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	dnstest.WriteFiles(t, dir, map[string]string{
		"ok.zone": zoneText(1, "x"),
		"long.yaml": `zones:
  - origin: example.com
    file: ok.zone
anycast:
  router_id: 198.51.100.1
  local_as: 64512
  prefixes: [192.0.2.0/25]
  peers:
    - { address: 127.0.53.1, remote_as: 64510 }
`,
		"bad.yaml": `zones:
  - origin: example.com
    file: ok.zone
anycast:
  prefixes: [192.0.2.0/24, 2001:db8:53::/48]
  next_hop_v6: ::ffff:192.0.2.1
  peers:
    - { address: 127.0.53.1, port: 99999, local_address: "::1", hold_time: 1s }
  mode: hot
`,
		"lab.yaml": `zones:
  - origin: example.com
    file: ok.zone
anycast:
  router_id: 198.51.100.1
  local_as: 64512
  prefixes: [192.0.2.0/25]
  allow_long_prefixes: true
  peers:
    - { address: 127.0.53.1, remote_as: 64510 }
`,
	})
	run := func(name string) (int, string) {
		cmd := exec.Command(steerBin, "check", "--config", filepath.Join(dir, name))
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	code, out := run("long.yaml")
	if want := filepath.Join(dir, "long.yaml") + ":7: anycast.prefixes[0]: 192.0.2.0/25 is longer than /24: transit providers filter"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("check long.yaml: exit %d, want 1 and %q in:\n%s", code, want, out)
	}
	code, out = run("bad.yaml")
	if code != 1 {
		t.Errorf("check bad.yaml: exit %d", code)
	}
	f := filepath.Join(dir, "bad.yaml")
	for _, want := range []string{
		f + ":4: anycast.router_id: missing",
		f + ":4: anycast.local_as: missing",
		f + ":6: anycast.next_hop_v6: ::ffff:192.0.2.1 is IPv4-mapped",
		f + ":8: anycast.peers[0]: port 99999",
		f + ":8: anycast.peers[0]: remote_as is missing",
		f + ":8: anycast.peers[0]: local_address ::1 and address 127.0.53.1 are of different families",
		f + ":8: anycast.peers[0]: hold_time 1s",
		f + `:9: anycast.mode: "hot" is neither active nor standby`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check bad.yaml: missing %q in:\n%s", want, out)
		}
	}
	if code, out := run("lab.yaml"); code != 0 {
		t.Errorf("check lab.yaml (allow_long_prefixes): exit %d\n%s", code, out)
	}
}

// waitUntil polls cond every 20 ms for up to limit and says whether it
// came true.
func waitUntil(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
