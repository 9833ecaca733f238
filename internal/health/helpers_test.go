package health

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

const (
	iv = 50 * time.Millisecond // check interval in tests
	to = 50 * time.Millisecond // check timeout in tests (Validate wants timeout <= interval)
)

var localhost = netip.MustParseAddr("127.0.0.1")

// newManager returns a Manager whose checkers start at once, closed at the
// end of the test.
func newManager(t *testing.T) *Manager {
	t.Helper()
	m := NewManager(nil)
	m.jitter = func(time.Duration) time.Duration { return 0 }
	t.Cleanup(m.Close)
	return m
}

// waitStatus waits for k's status and returns its state.
func waitStatus(t *testing.T, m *Manager, k Key, want Status, d time.Duration) State {
	t.Helper()
	var s State
	dnstest.WaitFor(t, d, k.String()+" "+want.String(), func() bool {
		s = m.Snapshot()[k]
		return s.Status == want
	})
	return s
}

// port returns the port of a listener address like 127.0.0.1:1234.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// webServer is an HTTP server whose status and body the test sets, counting
// requests.
type webServer struct {
	*httptest.Server
	code     atomic.Int64
	body     atomic.Value // string
	requests atomic.Int64
	lastHost atomic.Value // string
}

func newWebServer(t *testing.T, tls bool) *webServer {
	t.Helper()
	w := &webServer{}
	w.code.Store(200)
	w.body.Store("ok")
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.requests.Add(1)
		w.lastHost.Store(r.Host)
		rw.WriteHeader(int(w.code.Load()))
		rw.Write([]byte(w.body.Load().(string)))
	})
	w.Server = httptest.NewUnstartedServer(h)
	w.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are expected
	if tls {
		w.StartTLS()
	} else {
		w.Start()
	}
	t.Cleanup(w.Close)
	return w
}

func (w *webServer) port(t *testing.T) int { return port(t, w.Listener.Addr().String()) }
