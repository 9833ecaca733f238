package uitest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
)

// The steer binary the tests run, built once by TestMain; the browser the
// tests share, started by the first test that needs it.
var (
	steerBin    string
	tmpDir      string // the package's scratch directory (the browser's profile)
	sharedMu    sync.Mutex
	shared      *Browser
	sharedErr   error
	sharedTried bool
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "steer-uitest")
	if err != nil {
		panic(err)
	}
	os.Setenv("STEER_DEFAULT_CONFIG", filepath.Join(dir, "no-default-config.yaml"))
	tmpDir = dir
	// A plain build, as cmd/steer's process tests do, linked once for the
	// packages that run it.
	if steerBin, err = dnstest.SteerBinary(dir); err != nil {
		panic(err)
	}
	code := m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.Close()
	}
	sharedMu.Unlock()
	os.RemoveAll(dir)
	os.Exit(code)
}

// browser is the browser the tests share (each page its own tab); it is
// stopped when the tests end.
func browser(t *testing.T) *Browser {
	t.Helper()
	path := NeedChromium(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if !sharedTried {
		sharedTried = true
		shared, sharedErr = StartBrowser(path, filepath.Join(tmpDir, "profile"), Options{})
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// steer is a running steer serve.
type steer struct {
	cmd  *exec.Cmd
	logs dnstest.LockedBuffer
	done chan struct{}
}

// startSteer runs steer serve --config config and waits (30 s) for its
// "serving" line; it is killed by PID at the test's cleanup.
func startSteer(t *testing.T, config string, extra ...string) *steer {
	t.Helper()
	s := &steer{done: make(chan struct{})}
	s.cmd = exec.Command(steerBin, append([]string{"serve", "--config", config}, extra...)...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			s.logs.Write([]byte(sc.Text() + "\n"))
			if !once && strings.Contains(sc.Text(), "msg=serving") {
				once = true
				close(ready)
			}
		}
		io.Copy(io.Discard, stderr)
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("steer exited before serving:\n%s", s.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("steer did not start within 30 s:\n%s", s.logs.String())
	}
	return s
}

// target is a health-check target: an HTTP server on addr (which TCP
// checks also connect to) that the test stops and starts.
type target struct {
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func startTarget(t *testing.T, addr string) *target {
	t.Helper()
	tg := &target{addr: addr}
	if err := tg.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.stop)
	return tg
}

func (tg *target) start() error {
	ln, err := net.Listen("tcp", tg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}), ReadHeaderTimeout: time.Second}
	tg.mu.Lock()
	tg.srv = srv
	tg.mu.Unlock()
	go srv.Serve(ln)
	return nil
}

func (tg *target) stop() {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.srv != nil {
		tg.srv.Close()
		tg.srv = nil
	}
}

// commonPort is a port free on every one of hosts (the pools' addresses
// share their health check's port).
func commonPort(t *testing.T, hosts ...string) int {
	t.Helper()
	for range 50 {
		port := dnstest.FreePort(t, hosts[0])
		ok := true
		for _, h := range hosts {
			l, err := net.Listen("tcp", net.JoinHostPort(h, fmt.Sprint(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// ask sends one query for name with the client subnet ecs ("" for none)
// and returns the answer's addresses.
func ask(t *testing.T, server, name, ecs string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	if ecs != "" {
		_, n, err := net.ParseCIDR(ecs)
		if err != nil {
			t.Fatal(err)
		}
		ones, _ := n.Mask.Size()
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(ones), Address: n.IP.To4()})
	}
	m.Extra = append(m.Extra, opt)
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		t.Fatalf("query %s (ecs %s): %v", name, ecs, err)
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// apiCall sends a request to the admin API with the bearer token ("" for
// none) and returns the status and body.
func apiCall(t *testing.T, api, token, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+api+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func write(t *testing.T, path, body string) string {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// zone is the Larkbook zone (examples/larkbook) the configs serve.
func zone(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/larkbook/zones/example.com.zone")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
