package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/steer-dns/steer/internal/dnstest"
)

var steerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "steer-bin")
	if err != nil {
		panic(err)
	}
	// Tests without --config serve the demo whatever is in /etc (the
	// package test installs /etc/steer/steer.yaml while these run).
	os.Setenv("STEER_DEFAULT_CONFIG", filepath.Join(dir, "no-default-config.yaml"))
	// A plain build: the race detector slows compiling the demo's policy
	// against the embedded database tenfold, and in-process tests already
	// run the same code under -race. Linked once for the packages that run
	// the binary (dnstest.SteerBinary).
	if steerBin, err = dnstest.SteerBinary(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func zoneText(serial int, txt string) string {
	return fmt.Sprintf(`$ORIGIN example.com.
$TTL 300
@    SOA ns1 hostmaster %d 7200 3600 1209600 60
     NS  ns1
ns1  A   192.0.2.53
gen  TXT %q
www  A   192.0.2.80
`, serial, txt)
}

// writeAtomic replaces path the way an operator's deploy tool should: a
// reader sees the old file or the new one, never half of one.
func writeAtomic(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// process is a running steer binary.
type process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func startSteer(t *testing.T, config string, extra ...string) *process {
	t.Helper()
	return startSteerIn(t, "", config, extra...)
}

// startSteerIn is startSteer with dir as the working directory ("": the
// test's).
func startSteerIn(t *testing.T, dir, config string, extra ...string) *process {
	t.Helper()
	p := &process{done: make(chan error, 1)}
	p.cmd = exec.Command(steerBin, append([]string{"serve", "--config", config}, extra...)...)
	p.cmd.Dir = dir
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if !once && strings.Contains(sc.Text(), "msg=serving") {
				once = true
				close(ready)
			}
		}
		p.done <- p.cmd.Wait()
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Fatalf("steer did not start:\n%s", p.log())
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
	})
	return p
}

func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("steer exited with %v after SIGTERM; want 0\n%s", err, p.log())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("steer did not exit after SIGTERM\n%s", p.log())
	}
}

// apiCall sends a request to the admin API at addr, with the bearer token
// (none when empty) and, when ctype is set, that Content-Type, and returns
// the status and the body.
func apiCall(t *testing.T, addr, token, method, path, ctype, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func query(addr, name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, addr)
	return r, err
}

// TestReloadUnderLoad sends queries from several clients for a bounded time
// while the zone file changes and SIGHUP arrives again and again: no query
// may fail or get an answer that was never in any version of the zone, and
// the last version must be what is served at the end. Then a broken zone is
// rejected and the last good data keeps serving.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	zonePath := filepath.Join(dir, "example.com.zone")
	writeAtomic(t, zonePath, zoneText(1, "gen-1"))
	cfg := filepath.Join(dir, "steer.yaml")
	writeAtomic(t, cfg, fmt.Sprintf("listen: [%q]\nidentity: reload-test\nzones:\n  - origin: example.com\n    file: example.com.zone\n", addr))
	p := startSteer(t, cfg)

	var (
		stop     atomic.Bool
		answered atomic.Int64
		failed   atomic.Int64
		maxGen   atomic.Int64
		wg       sync.WaitGroup
		errMu    sync.Mutex
		errs     []string
	)
	fail := func(s string) {
		failed.Add(1)
		errMu.Lock()
		if len(errs) < 10 {
			errs = append(errs, s)
		}
		errMu.Unlock()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Timeout: 2 * time.Second}
			for !stop.Load() {
				m := new(dns.Msg)
				m.SetQuestion("gen.example.com.", dns.TypeTXT)
				r, _, err := c.Exchange(m, addr)
				if err != nil {
					fail(err.Error())
					continue
				}
				if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 {
					fail(r.String())
					continue
				}
				var gen int64
				txt := r.Answer[0].(*dns.TXT).Txt[0]
				if _, err := fmt.Sscanf(txt, "gen-%d", &gen); err != nil {
					fail("unexpected TXT " + txt)
					continue
				}
				for {
					old := maxGen.Load()
					if gen <= old || maxGen.CompareAndSwap(old, gen) {
						break
					}
				}
				answered.Add(1)
			}
		}()
	}

	deadline := time.Now().Add(4 * time.Second)
	gen := 1
	for time.Now().Before(deadline) {
		gen++
		writeAtomic(t, zonePath, zoneText(gen, fmt.Sprintf("gen-%d", gen)))
		p.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(100 * time.Millisecond)
	}
	// Let the last reload land, then stop the clients. (Generous: on a
	// loaded 2-core machine queued SIGHUPs can take a while to drain.)
	dnstest.WaitFor(t, 30*time.Second, "the last reload's gen TXT", func() bool {
		r, err := query(addr, "gen.example.com.", dns.TypeTXT)
		return err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.TXT).Txt[0] == fmt.Sprintf("gen-%d", gen)
	}, func() string {
		r, err := query(addr, "gen.example.com.", dns.TypeTXT)
		return fmt.Sprintf("want gen-%d; last answer %v %v\nlog:\n%s", gen, r, err, p.log())
	})
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d queries failed during reloads; first: %v", failed.Load(), failed.Load()+answered.Load(), errs)
	}
	if answered.Load() < 100 {
		t.Fatalf("only %d queries answered; the load loop did not run", answered.Load())
	}
	if maxGen.Load() < 3 {
		t.Fatalf("clients never saw new data (max generation %d of %d)", maxGen.Load(), gen)
	}
	t.Logf("%d queries answered across %d reloads, none failed", answered.Load(), gen-1)

	// A broken zone fails alone: the rest of the reload applies, the zone
	// keeps its previous copy, and the problem is logged with file:line.
	writeAtomic(t, zonePath, zoneText(gen+1, "broken")+"bad  IN  A  not-an-address\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	dnstest.WaitFor(t, 5*time.Second, "strings.Contains(p.log(), `msg=\"zone failed to load\"`)", func() bool { return strings.Contains(p.log(), `msg="zone failed to load"`) })
	if !strings.Contains(p.log(), "example.com.zone:8") {
		t.Errorf("rejection does not name the file and line:\n%s", p.log())
	}
	r, err := query(addr, "gen.example.com.", dns.TypeTXT)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != fmt.Sprintf("gen-%d", gen) {
		t.Fatalf("after a reload with a broken zone: %v %v; want the zone's previous data gen-%d", r, err, gen)
	}
	p.stop(t)
}

// TestServeDemoAndShutdown runs the embedded demo config the README's first
// command runs (on its fixed port when free) and checks the documented
// answer, then that SIGTERM exits 0.
func TestServeDemo(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	for _, a := range []string{"127.0.0.1:5353"} {
		if l, err := net.ListenPacket("udp", a); err != nil {
			t.Skipf("%s is busy; the demo config needs it", a)
		} else {
			l.Close()
		}
	}
	p := &process{done: make(chan error, 1)}
	p.cmd = exec.Command(steerBin, "serve", "--log-format", "json")
	var out bytes.Buffer
	p.cmd.Stderr = &out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	var r *dns.Msg
	dnstest.WaitFor(t, 10*time.Second, "an answer on the demo port", func() bool {
		var err error
		r, err = query("127.0.0.1:5353", "shop.example.com.", dns.TypeA)
		return err == nil
	})
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) == 0 {
		t.Fatalf("demo answer: %v", r)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(out.String(), `"msg":"serving"`) {
		t.Errorf("--log-format json did not log JSON:\n%s", out.String())
	}
}

func TestCheck(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	dnstest.WriteFiles(t, dir, map[string]string{
		"good.yaml": "zones:\n  - origin: example.com\n    file: ok.zone\n",
		"ok.zone":   zoneText(1, "x"),
		"bad.yaml": `listen: ["127.0.0.1:5353"]
zones:
  - origin: example.com
    file: broken.zone
  - origin: example.org
    file: missing.zone
tcp: { max_connectons: 5 }
`,
		"broken.zone": "$ORIGIN example.com.\n$TTL 60\n@ SOA ns1 h 1 2 3 4 5\n  NS ns1\nwww CNAME x\nwww A 192.0.2.1\n",
	})
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(steerBin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	code, out, errOut := run("check", "--config", filepath.Join(dir, "good.yaml"))
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check good: exit %d\n%s%s", code, out, errOut)
	}
	// check says where the state is kept (steer-state beside the file by
	// default), creating nothing.
	if want := "\nstate: " + filepath.Join(dir, "steer-state") + "\n"; !strings.Contains(out, want) {
		t.Errorf("check good: no %q in:\n%s", want, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "steer-state")); err == nil {
		t.Error("steer check created the state directory")
	}
	// A state directory that cannot be made (under a regular file: root
	// can write anywhere else) is an error at state_dir's line; the
	// deprecated health.state_file is a warning at its line.
	dnstest.WriteFiles(t, dir, map[string]string{"plain": "a file\n", "state.yaml": `health: { state_file: h.json }
state_dir: plain/sub
zones:
  - origin: example.com
    file: ok.zone
`})
	code, _, errOut = run("check", "--config", filepath.Join(dir, "state.yaml"))
	if want := filepath.Join(dir, "state.yaml") + ":2: state directory " + filepath.Join(dir, "plain", "sub") + " cannot be created"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("check with state_dir under a file: exit %d, want 1 and %q in:\n%s", code, want, errOut)
	}
	if want := filepath.Join(dir, "state.yaml") + ":1: warning: health.state_file is deprecated: the health state is kept in " + filepath.Join(dir, "h.json"); !strings.Contains(errOut, want) {
		t.Errorf("no %q in:\n%s", want, errOut)
	}
	// A file of an earlier version that sets only health.state_file keeps
	// its state in that file's directory, and is told to set state_dir.
	dnstest.WriteFiles(t, dir, map[string]string{"old.yaml": "health: { state_file: var/h.json }\nzones:\n  - origin: example.com\n    file: ok.zone\n"})
	code, out, errOut = run("check", "--config", filepath.Join(dir, "old.yaml"))
	if want := "\nstate: " + filepath.Join(dir, "var") + "\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("check of a file with only health.state_file: exit %d, want 0 and %q in:\n%s%s", code, want, out, errOut)
	}
	if want := filepath.Join(dir, "old.yaml") + ":1: warning: health.state_file is deprecated: set state_dir instead"; !strings.Contains(errOut, want) {
		t.Errorf("no %q in:\n%s", want, errOut)
	}
	code, _, errOut = run("check", "--config", filepath.Join(dir, "bad.yaml"))
	if code == 0 {
		t.Fatalf("check bad: exit 0\n%s", errOut)
	}
	// The unknown key is reported; zone problems need a valid config first.
	if want := filepath.Join(dir, "bad.yaml") + `:7: unknown key "max_connectons"`; !strings.Contains(errOut, want) {
		t.Errorf("missing %q in:\n%s", want, errOut)
	}
	// Fix the config: now every zone problem is reported with file:line.
	dnstest.WriteFiles(t, dir, map[string]string{"bad.yaml": `zones:
  - origin: example.com
    file: broken.zone
  - origin: example.org
    file: missing.zone
`})
	code, _, errOut = run("check", "--config", filepath.Join(dir, "bad.yaml"))
	for _, want := range []string{
		filepath.Join(dir, "broken.zone") + ":5: www.example.com. has a CNAME and other data",
		filepath.Join(dir, "bad.yaml") + ":4: zone example.org",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("missing %q in:\n%s", want, errOut)
		}
	}
	if code == 0 {
		t.Error("exit 0 for an invalid config")
	}
	code, out, _ = run("version")
	if code != 0 || !strings.HasPrefix(out, "steer ") || !strings.Contains(out, "\ncommit:") || !strings.Contains(out, "\ngo:") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, _, _ = run("frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

// TestGeoDatabaseReload replaces the geo database file under a running
// server: a corrupt file is rejected and the old data keeps answering; a
// valid new file takes over without a signal.
func TestGeoDatabaseReload(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	port := dnstest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "geo", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dbPath := filepath.Join(dir, "geo.mmdb")
	writeAtomic(t, dbPath, read("larkbook-country-flat.mmdb"))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
zones:
  - origin: example.com
    file: example.com.zone
geo: { databases: [geo.mmdb] }
records:
  - name: shop.example.com
    type: A
    ttl: 60
    pools:
      india: { address: 203.0.113.10 }
      other: { address: 192.0.2.30 }
    rules:
      - match: { country: IN }
        pool: india
      - default: { pool: other }
`, addr))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"), "--watch-interval", "100ms")
	answer := func() string {
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("192.0.2.0").To4()})
		r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, addr)
		if err != nil || len(r.Answer) != 1 {
			return fmt.Sprint("error: ", err, r)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	dnstest.WaitFor(t, 15*time.Second, `answer() == "203.0.113.10"`, func() bool { return answer() == "203.0.113.10" }, answer, p.log)

	writeAtomic(t, dbPath, "this is not a MaxMind database")
	dnstest.WaitFor(t, 10*time.Second, `strings.Contains(p.log(), "reload rejected")`, func() bool { return strings.Contains(p.log(), "reload rejected") }, p.log)
	if got := answer(); got != "203.0.113.10" {
		t.Fatalf("after a corrupt database: %s, want the old answer 203.0.113.10\n%s", got, p.log())
	}
	// An ASN-shaped database knows no countries: the default pool answers.
	writeAtomic(t, dbPath, read("larkbook-asn.mmdb"))
	dnstest.WaitFor(t, 10*time.Second, `answer() == "192.0.2.30"`, func() bool { return answer() == "192.0.2.30" })
	p.stop(t)
}

// TestWildcardListenRepliesFromQueriedAddress serves on 0.0.0.0 and [::]
// inside a private network namespace (so nothing but its own loopback is
// bound) and queries 127.0.0.1 and 127.0.0.53: a reply must come from the
// address the query went to (IP_PKTINFO), or a client's connected socket
// drops it. Needs root and unshare(1).
func TestWildcardListenRepliesFromQueriedAddress(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	dnstest.NeedTool(t, "unshare")
	dnstest.NeedTool(t, "kdig")
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "wild"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), "listen: [\"0.0.0.0:5399\", \"[::]:5399\"]\nzones:\n  - origin: example.com\n    file: example.com.zone\n")
	script := fmt.Sprintf(`ip link set lo up || exit 1
%s serve --config %s/steer.yaml >%s/log 2>&1 &
pid=$!
trap 'kill -KILL $pid 2>/dev/null' EXIT
for i in $(seq 1 50); do kill -0 $pid || exit 1; kdig @127.0.0.1 -p 5399 +time=1 +retry=0 +tcp www.example.com A +short 2>/dev/null | grep -q . && break; sleep 0.2; done
for a in 127.0.0.1 127.0.0.53 ::1; do
  printf '%%s ' $a
  kdig @$a -p 5399 +time=2 +retry=0 +notcp www.example.com A +short
done
kill -TERM $pid
wait $pid
`, steerBin, dir, dir)
	cmd := exec.Command("unshare", "--net", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	logs, _ := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatalf("%v\n%s\nserver log:\n%s", err, out, logs)
	}
	for _, a := range []string{"127.0.0.1", "127.0.0.53", "::1"} {
		if !strings.Contains(string(out), a+" 192.0.2.80") {
			t.Errorf("no answer via %s (a reply from another address is dropped):\n%s\nserver log:\n%s", a, out, logs)
		}
	}
}

// TestHealthFailover runs steer with TCP health checks against real
// listeners on loopback addresses: a dead address of a pool is left out, a
// failing primary pool gives way to the backup within interval × fall +
// 1 s (measured), recovers after rise, and with everything down the record
// fails open to every address of the matched rule.
func TestHealthFailover(t *testing.T) {
	// One port free on 127.0.0.2 and 127.0.0.3 (127.0.0.4 stays closed).
	var l2, l3 net.Listener
	var port int
	for range 20 {
		a, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("cannot bind 127.0.0.2: %v", err)
		}
		port = a.Addr().(*net.TCPAddr).Port
		if b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.3:%d", port)); err == nil {
			l2, l3 = a, b
			break
		}
		a.Close()
	}
	if l2 == nil {
		t.Fatal("no common free port")
	}
	accept := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}
	go accept(l2)
	go accept(l3)
	defer l3.Close()

	dir := t.TempDir()
	dnsPort := dnstest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
zones:
  - origin: example.com
    file: example.com.zone
health_checks:
  tcp: { type: tcp, port: %d, interval: 200ms, timeout: 100ms, rise: 2, fall: 2 }
records:
  - name: shop.example.com
    ttl: 30
    pools:
      primary: { addresses: [127.0.0.2, 127.0.0.4], health_check: tcp }
      backup:  { address: 127.0.0.3, health_check: tcp }
    rules:
      - default: { failover: [primary, backup] }
`, addr, port))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	answer := func() string {
		r, err := query(addr, "shop.example.com.", dns.TypeA)
		if err != nil {
			return "error: " + err.Error()
		}
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	// 127.0.0.4 refuses connections: once it has failed twice, the
	// primary pool answers with its live address only.
	dnstest.WaitFor(t, 5*time.Second, `answer() == "127.0.0.2"`, func() bool { return answer() == "127.0.0.2" }, answer, p.log)

	// The primary fails: the backup must answer within interval × fall + 1 s.
	l2.Close()
	failed := time.Now()
	dnstest.WaitFor(t, 5*time.Second, `answer() == "127.0.0.3"`, func() bool { return answer() == "127.0.0.3" }, answer, p.log)
	took := time.Since(failed)
	if limit := 2*200*time.Millisecond + time.Second; took > limit {
		t.Errorf("answers excluded the failed pool after %v; want at most %v", took, limit)
	}
	t.Logf("failed primary excluded after %v", took.Round(time.Millisecond))

	// It comes back: after rise successes the primary answers again.
	l2b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.2:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	go accept(l2b)
	dnstest.WaitFor(t, 5*time.Second, `answer() == "127.0.0.2"`, func() bool { return answer() == "127.0.0.2" }, answer, p.log)

	// Everything down: fail open with every address of the matched rule.
	l2b.Close()
	l3.Close()
	dnstest.WaitFor(t, 5*time.Second, `answer() == "127.0.0.2 127.0.0.3 127.0.0.4"`, func() bool { return answer() == "127.0.0.2 127.0.0.3 127.0.0.4" }, answer, p.log)
	p.stop(t)
}

// TestAdminAPI drives the admin API of a running steer: health and
// readiness, status, explain, pool drain and target overrides changing
// answers at once, and reload; /v1/ needs the bearer token.
func TestAdminAPI(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "token"), "s3cret\n")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
metrics: { per_record: [shop.example.com] }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    ttl: 1
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, addr, apiAddr))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	answer := func() string {
		r, err := query(addr, "shop.example.com.", dns.TypeA)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprint("error: ", err, r)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	call := func(method, path, body string, auth bool) (int, string) {
		token := ""
		if auth {
			token = "s3cret"
		}
		return apiCall(t, apiAddr, token, method, path, "", body)
	}
	if code, _ := call("GET", "/healthz", "", false); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	if code, body := call("GET", "/readyz", "", false); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if code, _ := call("GET", "/v1/status", "", false); code != 401 {
		t.Fatalf("status without a token: %d, want 401", code)
	}
	code, body := call("GET", "/v1/status", "", true)
	if code != 200 || !strings.Contains(body, `"shop.example.com."`) || !strings.Contains(body, `"primary"`) {
		t.Fatalf("status: %d %s", code, body)
	}
	code, body = call("GET", "/v1/explain?name=shop.example.com&type=A&from=192.0.2.150", "", true)
	if code != 200 || !strings.Contains(body, "192.0.2.1") {
		t.Fatalf("explain: %d %s", code, body)
	}
	if got := answer(); got != "192.0.2.1" {
		t.Fatalf("before drain: %s", got)
	}
	code, body = call("GET", "/metrics", "", false)
	if code != 200 || !strings.Contains(body, `steer_steered_answers_total{fail_open="false",pool="primary",record="shop.example.com."}`) {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	for _, name := range []string{"steer_dns_queries_total", "steer_dns_response_bytes_total", "steer_steered_answers_total",
		"steer_steering_decisions_total", "steer_dns_ecs_queries_total", "steer_dns_ecs_scope_prefix_length",
		"steer_health_pool_up", "steer_health_transitions_total", "steer_reloads_total",
		"steer_geo_database_build_timestamp_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if families[name] == nil {
			t.Errorf("metric %s missing from the scrape", name)
		}
	}

	// Drain the primary: the next answer is the backup, and status says
	// when it is safe (TTL 1 s after the last answer naming it).
	if code, body := call("PUT", "/v1/records/shop.example.com/pools/primary/state", `{"state":"drain"}`, true); code/100 != 2 {
		t.Fatalf("drain: %d %s", code, body)
	}
	if got := answer(); got != "192.0.2.2" {
		t.Fatalf("after drain: %s, want the backup", got)
	}
	_, body = call("GET", "/v1/status", "", true)
	if !strings.Contains(body, `"drain"`) || !strings.Contains(body, `"drain_safe"`) {
		t.Fatalf("status after drain: %s", body)
	}
	dnstest.WaitFor(t, 5*time.Second, "drain_safe in /v1/status", func() bool {
		_, body := call("GET", "/v1/status", "", true)
		return strings.Contains(strings.ReplaceAll(body, " ", ""), `"drain_safe":true`)
	}, func() string { _, body := call("GET", "/v1/status", "", true); return body })
	if code, _ := call("PUT", "/v1/records/shop.example.com/pools/nosuch/state", `{"state":"drain"}`, true); code != 404 {
		t.Fatalf("unknown pool: %d, want 404", code)
	}
	if code, _ := call("PUT", "/v1/records/shop.example.com/pools/primary/state", `{"state":"auto"}`, true); code/100 != 2 {
		t.Fatalf("auto: %d", code)
	}
	if got := answer(); got != "192.0.2.1" {
		t.Fatalf("after auto: %s", got)
	}

	// A target override with an expiry: down now, back by itself.
	if code, body := call("PUT", "/v1/targets/192.0.2.1/state", `{"state":"down","expires":"1s"}`, true); code/100 != 2 {
		t.Fatalf("target down: %d %s", code, body)
	}
	if got := answer(); got != "192.0.2.2" {
		t.Fatalf("with 192.0.2.1 set down: %s, want the backup", got)
	}
	dnstest.WaitFor(t, 5*time.Second, `answer() == "192.0.2.1"`, func() bool { return answer() == "192.0.2.1" }, answer)
	if code, body := call("POST", "/v1/reload", "", true); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), "listen: [broken")
	if code, body := call("POST", "/v1/reload", "", true); code != 422 || !strings.Contains(body, "steer.yaml") {
		t.Fatalf("bad reload: %d %s", code, body)
	}
	if got := answer(); got != "192.0.2.1" {
		t.Fatalf("after a rejected reload: %s", got)
	}
	p.stop(t)
}

// TestHealthStateFileRestored: a target found down is still down after a
// restart with the state file, before its first new check (a long
// interval keeps that check away), instead of starting as usable.
func TestHealthStateFileRestored(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	deadPort := dnstest.FreePort(t) // nothing listens there
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	cfg := func(interval string) {
		writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
health: { state_file: health.json }
health_checks:
  tcp: { type: tcp, port: %d, interval: %s, timeout: 100ms, rise: 1, fall: 1 }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      primary: { address: 127.0.0.1, health_check: tcp }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, addr, deadPort, interval))
	}
	answer := func() string {
		r, err := query(addr, "shop.example.com.", dns.TypeA)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprint("error: ", err)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	cfg("200ms")
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	dnstest.WaitFor(t, 5*time.Second, `answer() == "192.0.2.2"`, func() bool { return answer() == "192.0.2.2" }, answer, p.log)
	p.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "health.json")); err != nil {
		t.Fatalf("no state file after shutdown: %v", err)
	}
	cfg("1h")
	p = startSteer(t, filepath.Join(dir, "steer.yaml"))
	if got := answer(); got != "192.0.2.2" {
		t.Fatalf("after a restart with the state file: %s, want the backup (primary restored as down)", got)
	}
	p.stop(t)
	// Without the state file the primary starts unknown, hence usable.
	os.Remove(filepath.Join(dir, "health.json"))
	p = startSteer(t, filepath.Join(dir, "steer.yaml"))
	if got := answer(); got != "127.0.0.1" {
		t.Fatalf("after a restart without the state file: %s, want the primary (unknown counts as up)", got)
	}
	p.stop(t)
}

// TestQueryLog: with query_log on, every sampled query becomes one JSON
// line naming the rule and pool that decided, the answer and the scope.
func TestQueryLog(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
query_log: { path: queries.log, sample: 1 }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      lab:   { address: 192.0.2.1 }
      other: { address: 192.0.2.2 }
    rules:
      - match: { cidr: [10.0.0.0/8] }
        pool: lab
      - default: { pool: other }
`, addr))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	for range 5 {
		m := new(dns.Msg)
		m.SetQuestion("shop.example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("10.1.2.0").To4()})
		if _, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr); err != nil {
			t.Fatal(err)
		}
	}
	p.stop(t) // flushes the log
	b, err := os.ReadFile(filepath.Join(dir, "queries.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d log lines, want 5:\n%s", len(lines), b)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"name": "shop.example.com.", "type": "A", "rcode": "NOERROR", "rule": 1.0, "pool": "lab", "ecs": "10.1.2.0/24", "scope": 8.0, "transport": "udp"} {
		if e[k] != want {
			t.Errorf("%s = %v, want %v (line %s)", k, e[k], want, lines[0])
		}
	}
	if a, _ := e["answers"].([]any); len(a) != 1 || a[0] != "192.0.2.1" {
		t.Errorf("answers %v", e["answers"])
	}
}

// TestHealthFeedFile: the watched feed file sets pools and targets, entries
// that disappear go back to auto, and a bad file changes nothing.
func TestHealthFeedFile(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	feedPath := filepath.Join(dir, "feed.json")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
health: { feed_file: feed.json }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, addr))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"), "--watch-interval", "100ms")
	answer := func() string {
		r, err := query(addr, "shop.example.com.", dns.TypeA)
		if err != nil || len(r.Answer) == 0 {
			return fmt.Sprint("error: ", err)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	dnstest.WaitFor(t, 10*time.Second, `answer() == "192.0.2.1"`, func() bool { return answer() == "192.0.2.1" }, answer, p.log)

	writeAtomic(t, feedPath, `{"pools": {"shop.example.com/primary": {"state": "down"}}}`)
	dnstest.WaitFor(t, 5*time.Second, `answer() == "192.0.2.2"`, func() bool { return answer() == "192.0.2.2" }, answer, p.log)

	// The pool entry goes; a target entry drains the primary's only address.
	writeAtomic(t, feedPath, `{"targets": {"192.0.2.1": {"state": "drain", "expires": "1h"}}}`)
	dnstest.WaitFor(t, 5*time.Second, `strings.Count(p.log(), "health feed applied") >= 2`, func() bool { return strings.Count(p.log(), "health feed applied") >= 2 }, p.log)
	if got := answer(); got != "192.0.2.2" {
		t.Fatalf("with 192.0.2.1 drained by the feed: %s", got)
	}

	// A bad file is rejected and the previous feed stays.
	writeAtomic(t, feedPath, `{"targets": {"not-an-address": {"state": "down"}}}`)
	dnstest.WaitFor(t, 5*time.Second, `strings.Contains(p.log(), "health feed rejected")`, func() bool { return strings.Contains(p.log(), "health feed rejected") }, p.log)
	if got := answer(); got != "192.0.2.2" {
		t.Fatalf("after a bad feed: %s, want the previous feed's answer", got)
	}

	// Empty: everything back to auto.
	writeAtomic(t, feedPath, `{}`)
	dnstest.WaitFor(t, 5*time.Second, `answer() == "192.0.2.1"`, func() bool { return answer() == "192.0.2.1" }, answer, p.log)
	p.stop(t)
}

// TestHealthHTTPSAndDNSTargets drives answers through HTTPS (self-signed)
// and DNS health checks: a split renormalises over its healthy pool, a rule
// whose pools all fail falls through to the next (on_unhealthy: next_rule),
// and with nothing healthy the record fails open to the first rule's pools.
func TestHealthHTTPSAndDNSTargets(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	// HTTPS targets on 127.0.0.2 and 127.0.0.3, one port.
	var healthy [2]atomic.Bool
	var web [2]*httptest.Server
	var port int
	for range 20 {
		l2, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("cannot bind 127.0.0.2: %v", err)
		}
		port = l2.Addr().(*net.TCPAddr).Port
		l3, err := net.Listen("tcp", fmt.Sprintf("127.0.0.3:%d", port))
		if err != nil {
			l2.Close()
			continue
		}
		for i, l := range []net.Listener{l2, l3} {
			i := i
			healthy[i].Store(true)
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/healthz" && healthy[i].Load() {
					w.Write([]byte("ok"))
					return
				}
				http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			}))
			s.Listener.Close()
			s.Listener = l
			s.StartTLS()
			web[i] = s
			t.Cleanup(s.Close)
		}
		break
	}
	if web[0] == nil {
		t.Fatal("no common free port")
	}
	// A DNS target on 127.0.0.4.
	pc, err := net.ListenPacket("udp", "127.0.0.4:0")
	if err != nil {
		t.Skipf("cannot bind 127.0.0.4: %v", err)
	}
	dnsPort := pc.LocalAddr().(*net.UDPAddr).Port
	mux := dns.NewServeMux()
	mux.HandleFunc("example.net.", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		w.WriteMsg(m)
	})
	dnsSrv := &dns.Server{PacketConn: pc, Handler: mux}
	go dnsSrv.ActivateAndServe()
	defer dnsSrv.Shutdown()

	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
health_checks:
  web:   { type: https, path: /healthz, port: %d, host: shop.example.com, insecure_skip_verify: true, body_contains: ok,
           interval: 200ms, timeout: 150ms, rise: 1, fall: 1 }
  dnsck: { type: dns, name: example.net, qtype: SOA, port: %d, interval: 200ms, timeout: 150ms, rise: 1, fall: 1 }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    ttl: 30
    pools:
      a: { address: 127.0.0.2, health_check: web }
      b: { address: 127.0.0.3, health_check: web }
      c: { address: 127.0.0.4, health_check: dnsck }
    rules:
      - match: { cidr: [10.0.0.0/8] }
        split: [{ pool: a, weight: 50 }, { pool: b, weight: 50 }]
      - default: { pool: c }
    on_unhealthy: next_rule
`, addr, port, dnsPort))
	p := startSteer(t, filepath.Join(dir, "steer.yaml"))
	// answers asks n times from inside 10.0.0.0/8 and returns the set seen.
	answers := func(n int) string {
		seen := map[string]bool{}
		for range n {
			m := new(dns.Msg)
			m.SetQuestion("shop.example.com.", dns.TypeA)
			m.SetEdns0(1232, false)
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("10.1.0.0").To4()})
			r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, addr)
			if err != nil || len(r.Answer) == 0 {
				seen["error"] = true
				continue
			}
			for _, rr := range r.Answer {
				seen[rr.(*dns.A).A.String()] = true
			}
		}
		var out []string
		for a := range seen {
			out = append(out, a)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	dnstest.WaitFor(t, 5*time.Second, `answers(60) == "127.0.0.2 127.0.0.3"`, func() bool { return answers(60) == "127.0.0.2 127.0.0.3" }, func() string { return answers(60) }, p.log)

	healthy[1].Store(false) // b's /healthz says 503: the split renormalises to a
	dnstest.WaitFor(t, 5*time.Second, `answers(40) == "127.0.0.2"`, func() bool { return answers(40) == "127.0.0.2" }, func() string { return answers(40) }, p.log)

	healthy[0].Store(false) // both split pools down: on to the next rule, c
	dnstest.WaitFor(t, 5*time.Second, `answers(10) == "127.0.0.4"`, func() bool { return answers(10) == "127.0.0.4" }, func() string { return answers(10) }, p.log)

	dnsSrv.Shutdown() // nothing healthy: fail open to the matched rule's pools
	dnstest.WaitFor(t, 5*time.Second, `answers(60) == "127.0.0.2 127.0.0.3"`, func() bool { return answers(60) == "127.0.0.2 127.0.0.3" }, func() string { return answers(60) }, p.log)

	healthy[0].Store(true) // a recovers
	dnstest.WaitFor(t, 5*time.Second, `answers(40) == "127.0.0.2"`, func() bool { return answers(40) == "127.0.0.2" }, func() string { return answers(40) }, p.log)
	p.stop(t)
}
