package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/dnstest"
)

// threePools is shop.example.com with three pools in failover order,
// each checked over HTTP at its own port of 127.0.0.x.
func threePools(addr, apiAddr string, ports [3]int, extra string) string {
	return fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
health: { state_file: health.json, feed_file: feed.json }
health_checks:
  web0: { type: http, port: %d, path: /, interval: 100ms, timeout: 100ms, rise: 1, fall: 1 }
  web1: { type: http, port: %d, path: /, interval: 100ms, timeout: 100ms, rise: 1, fall: 1 }
  web2: { type: http, port: %d, path: /, interval: 100ms, timeout: 100ms, rise: 1, fall: 1 }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    ttl: 1
    pools:
      fra: { address: 127.0.0.1, health_check: web0 }
      sin: { address: 127.0.0.2, health_check: web1 }
      iad: { address: 127.0.0.3, health_check: web2 }
      bom: { address: 192.0.2.4 }
    rules:
      - default: { failover: [fra, sin, iad, bom] }
%s`, addr, apiAddr, ports[0], ports[1], ports[2], extra)
}

// httpTarget serves 200 on addr until stopped, then 503 on the same
// listener: the port stays the test's, so another test's server cannot
// take it and answer the health check in its place.
func httpTarget(t *testing.T, addr string) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return func() { down.Store(true); srv.SetKeepAlivesEnabled(false) }
}

func aAnswer(addr string) string {
	r, err := query(addr, "shop.example.com.", dns.TypeA)
	if err != nil || len(r.Answer) == 0 {
		return fmt.Sprint("error: ", err)
	}
	return r.Answer[0].(*dns.A).A.String()
}

type poolJSON struct {
	Name    string     `json:"name"`
	State   string     `json:"state"`
	Expires *time.Time `json:"override_expires"`
}

func poolStates(t *testing.T, apiAddr string) map[string]poolJSON {
	t.Helper()
	code, body := apiCall(t, apiAddr, "tok", "GET", "/v1/status", "", "")
	if code != 200 {
		t.Fatalf("status: %d %s", code, body)
	}
	var st struct {
		Records []struct {
			Pools []poolJSON `json:"pools"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Records) != 1 {
		t.Fatalf("status: %v %s", err, body)
	}
	out := map[string]poolJSON{}
	for _, p := range st.Records[0].Pools {
		out[p.Name] = p
	}
	return out
}

// Pools drained and downed through the API, and one set by the feed
// file, stay so across a restart with the same state file, with their
// expiries; an expiry that passes while the node is down is honoured.
func TestOperatorStateSurvivesRestart(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	var ports [3]int
	for i := range ports {
		ports[i] = dnstest.FreePort(t)
		httpTarget(t, fmt.Sprintf("127.0.0.%d:%d", i+1, ports[i]))
	}
	writeAtomic(t, filepath.Join(dir, "token"), "tok")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "feed.json"), `{"pools": {"shop.example.com/iad": {"state": "down", "expires": "1h"}}}`)
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), threePools(addr, apiAddr, ports, ""))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	dnstest.WaitFor(t, 5*time.Second, `aAnswer(addr) == "127.0.0.1"`, func() bool { return aAnswer(addr) == "127.0.0.1" }, func() string { return aAnswer(addr) }, p.log)
	if code, body := apiCall(t, apiAddr, "tok", "PUT", "/v1/records/shop.example.com/pools/fra/state", "", `{"state":"drain","expires":"2h"}`); code != 204 {
		t.Fatalf("drain: %d %s", code, body)
	}
	if code, body := apiCall(t, apiAddr, "tok", "PUT", "/v1/records/shop.example.com/pools/sin/state", "", `{"state":"down"}`); code != 204 {
		t.Fatalf("down: %d %s", code, body)
	}
	if got := aAnswer(addr); got != "192.0.2.4" {
		t.Fatalf("fra drained, sin down, iad down by the feed: answer %s, want bom", got)
	}
	before := poolStates(t, apiAddr)
	p.stop(t)
	p = startSteer(t, filepath.Join(dir, "steer.yaml"))
	if got := aAnswer(addr); got != "192.0.2.4" {
		t.Fatalf("after a restart: answer %s, want bom (fra drained, sin and iad down)\n%s", got, p.log())
	}
	after := poolStates(t, apiAddr)
	for _, name := range []string{"fra", "sin", "iad"} {
		b, a := before[name], after[name]
		if a.State != b.State || (a.Expires == nil) != (b.Expires == nil) || a.Expires != nil && !a.Expires.Equal(*b.Expires) {
			t.Errorf("pool %s: before the restart %s until %v, after %s until %v", name, b.State, b.Expires, a.State, a.Expires)
		}
	}
	if after["fra"].State != "drain" || after["sin"].State != "down" || after["iad"].State != "down" || after["fra"].Expires == nil || after["sin"].Expires != nil {
		t.Fatalf("after the restart: %+v", after)
	}
	// A short expiry passes while the node is stopped: the pool is back.
	apiCall(t, apiAddr, "tok", "PUT", "/v1/records/shop.example.com/pools/sin/state", "", `{"state":"down","expires":"1s"}`)
	p.stop(t)
	time.Sleep(1200 * time.Millisecond)
	p = startSteer(t, filepath.Join(dir, "steer.yaml"))
	dnstest.WaitFor(t, 5*time.Second, `aAnswer(addr) == "127.0.0.2"`, func() bool { return aAnswer(addr) == "127.0.0.2" }, func() string { return aAnswer(addr) }, p.log)
	p.stop(t)
}

// With a health target down, steer explain (the CLI, asking the running
// node) names the same pool and address as the live answer; --offline
// says so on its first line and does not know the target is down.
func TestExplainMatchesLiveAnswer(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	var ports [3]int
	var stops [3]func()
	for i := range ports {
		ports[i] = dnstest.FreePort(t)
		stops[i] = httpTarget(t, fmt.Sprintf("127.0.0.%d:%d", i+1, ports[i]))
	}
	writeAtomic(t, filepath.Join(dir, "token"), "tok")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	cfg := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, cfg, threePools(addr, apiAddr, ports, ""))
	p := startSteer(t, cfg)
	stops[0]() // Frankfurt's web server goes away
	dnstest.WaitFor(t, 5*time.Second, `aAnswer(addr) == "127.0.0.2"`, func() bool { return aAnswer(addr) == "127.0.0.2" }, func() string { return aAnswer(addr) }, p.log)
	run := func(args ...string) string {
		out, err := exec.Command(steerBin, append([]string{"explain"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("steer explain %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	live := run("shop.example.com", "--config", cfg)
	if !strings.HasPrefix(live, "source:   live") || !strings.Contains(live, "-> sin") || !strings.Contains(live, "127.0.0.2") {
		t.Fatalf("live explain does not match the answer 127.0.0.2 (sin):\n%s", live)
	}
	if !strings.Contains(live, "fra") || !strings.Contains(live, "down") {
		t.Fatalf("live explain does not show fra down:\n%s", live)
	}
	if alt := run("shop.example.com", "--api", apiAddr, "--token-file", filepath.Join(dir, "token")); !strings.Contains(alt, "127.0.0.2") {
		t.Fatalf("explain --api:\n%s", alt)
	}
	off := run("shop.example.com", "--config", cfg, "--offline")
	if first, _, _ := strings.Cut(off, "\n"); !strings.Contains(first, "OFFLINE") {
		t.Fatalf("--offline must say so on its first line:\n%s", off)
	}
	if !strings.Contains(off, "127.0.0.1") {
		t.Fatalf("offline explain knows no health, so fra answers:\n%s", off)
	}
	p.stop(t)
	// No node running: explain says it fell back to the config alone.
	fallback := run("shop.example.com", "--config", cfg)
	if first, _, _ := strings.Cut(fallback, "\n"); !strings.Contains(first, "OFFLINE") || !strings.Contains(first, "no running node answered") {
		t.Fatalf("with no node running, explain must say it is offline and why:\n%s", fallback)
	}
	demo := run("shop.example.com")
	if first, _, _ := strings.Cut(demo, "\n"); !strings.Contains(first, "the embedded demo") {
		t.Fatalf("without --config explain must say it used the embedded demo:\n%s", demo)
	}
}

// 50 SIGHUPs in a burst while POST /v1/reload runs in a loop: every API
// reload returns a result, the zone written last is served within 1 s
// after the burst, and the log shows reloads one after the other.
func TestSIGHUPBurstWithAPIReloads(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	zonePath := filepath.Join(dir, "example.com.zone")
	writeAtomic(t, zonePath, zoneText(1, "v1"))
	writeAtomic(t, filepath.Join(dir, "token"), "tok")
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
zones:
  - origin: example.com
    file: example.com.zone
`, addr, apiAddr))
	pidFile := filepath.Join(dir, "steer.pid")
	p := startSteer(t, filepath.Join(dir, "steer.yaml"), "--pid-file", pidFile)
	b, err := os.ReadFile(pidFile)
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid != p.cmd.Process.Pid {
		t.Fatalf("pid file %q, want %d (%v)", b, p.cmd.Process.Pid, err)
	}
	stop := make(chan struct{})
	var calls, bad atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, body := apiCall(t, apiAddr, "tok", "POST", "/v1/reload", "", "")
			calls.Add(1)
			if code != 200 || !strings.Contains(body, `"applied": true`) {
				bad.Add(1)
			}
		}
	}()
	gen := func() string {
		r, err := query(addr, "gen.example.com.", dns.TypeTXT)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprint("error: ", err)
		}
		return r.Answer[0].(*dns.TXT).Txt[0]
	}
	for i := 2; i <= 51; i++ {
		writeAtomic(t, zonePath, zoneText(i, "v"+strconv.Itoa(i)))
		p.cmd.Process.Signal(syscall.SIGHUP)
	}
	dnstest.WaitFor(t, time.Second, `gen() == "v51"`, func() bool { return gen() == "v51" }, gen, p.log)
	close(stop)
	wg.Wait()
	if calls.Load() == 0 || bad.Load() != 0 {
		t.Fatalf("%d of %d API reloads failed", bad.Load(), calls.Load())
	}
	// Sequence numbers in the log rise one by one: no reload ran twice at
	// once or was skipped.
	var seqs []int
	for _, line := range strings.Split(p.log(), "\n") {
		if i := strings.Index(line, " seq="); i >= 0 && strings.Contains(line, "msg=reloaded") {
			n, _ := strconv.Atoi(strings.Fields(line[i+5:])[0])
			seqs = append(seqs, n)
		}
	}
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("reload sequence %v is not 1, 2, 3...", seqs)
		}
	}
	t.Logf("50 SIGHUPs and %d API reloads ran as %d reloads", calls.Load(), len(seqs))
	p.stop(t)
}

// mv of the query log, then SIGHUP (or SIGUSR1): a new file is written.
func TestQueryLogRotation(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
query_log: { path: query.log }
zones:
  - origin: example.com
    file: example.com.zone
`, addr))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	logPath := filepath.Join(dir, "query.log")
	lines := func(path string) int {
		b, _ := os.ReadFile(path)
		return bytes.Count(b, []byte("\n"))
	}
	// ask sends n queries and returns how many were answered: on a loaded
	// machine a UDP query can go unanswered within the client's timeout,
	// and an unanswered query may or may not have been logged.
	ask := func(n int) (answered int) {
		for i := 0; i < n; i++ {
			if r, err := query(addr, "www.example.com.", dns.TypeA); err == nil && r != nil {
				answered++
			}
		}
		return answered
	}
	answered := 0
	for i := 0; i < 20 && answered < 5; i++ {
		answered += ask(1)
	}
	if answered < 5 {
		t.Fatalf("only %d of 20 queries answered", answered)
	}
	dnstest.WaitFor(t, 10*time.Second, `lines(logPath) >= 5`, func() bool { return lines(logPath) >= answered }, p.log)
	// Each rotation: the renamed file keeps every line it had and gets
	// those written before the reopen; the new file gets the rest; no
	// answered query's line is lost.
	files := []string{logPath}
	for i, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1} {
		rotated := fmt.Sprintf("%s.%d", logPath, i+1)
		before := lines(logPath)
		if err := os.Rename(logPath, rotated); err != nil {
			t.Fatal(err)
		}
		files = append(files, rotated)
		p.cmd.Process.Signal(sig)
		dnstest.WaitFor(t, 10*time.Second, "a query log line", func() bool { answered += ask(1); return lines(logPath) > 0 }, p.log)
		if got := lines(rotated); got < before {
			t.Fatalf("after %v the rotated file lost lines: %d of %d", sig, got, before)
		}
	}
	all := func() (n int) {
		for _, f := range files {
			n += lines(f)
		}
		return n
	}
	dnstest.WaitFor(t, 10*time.Second, fmt.Sprintf("all %d answered queries logged", answered), func() bool { return all() >= answered }, p.log)
	p.stop(t)
}

// serve --listen replaces the configuration's addresses.
func TestServeListenFlag(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	p := startSteer(t, "", "--listen", addr)
	_ = p
	r, err := query(addr, "example.com.", dns.TypeSOA)
	if err != nil || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("the demo on --listen %s: %v %v", addr, err, r)
	}
	p.stop(t)
}

// SIGTERM while the policies are still being compiled stops at once with
// status 0 instead of waiting out the compile.
func TestSIGTERMDuringStartup(t *testing.T) {
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	var recs strings.Builder
	for i := 0; i < 12; i++ { // each compiled against the embedded database: seconds in all
		fmt.Fprintf(&recs, `  - name: s%d.example.com
    pools:
      a: { address: 192.0.2.%d }
      b: { address: 198.51.100.%d }
    rules:
      - match: { continent: [EU, AF] }
        pool: a
      - match: { country: [IN, %s] }
        pool: b
      - default: { pool: a }
`, i, i+1, i+1, []string{"US", "DE", "FR", "BR", "JP", "CN", "GB", "IT", "ES", "CA", "MX", "AU"}[i])
	}
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf("listen: [%q]\nzones:\n  - { origin: example.com, file: example.com.zone }\nrecords:\n%s", addr, recs.String()))
	var out bytes.Buffer
	cmd := exec.Command(steerBin, "serve", "--config", filepath.Join(dir, "steer.yaml"))
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit %v after SIGTERM during start-up\n%s", err, out.String())
		}
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("SIGTERM during start-up was not honoured within 3 s\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stopped during start-up") {
		t.Fatalf("the start-up finished before the signal (make the config slower to compile):\n%s", out.String())
	}
	t.Logf("stopped %v after SIGTERM during start-up", time.Since(start).Round(time.Millisecond))
}
