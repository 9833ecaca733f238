package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/simulate"
)

// canaryConfig steers shop.example.com 95/5 for every client: the
// simulation needs no zone, only the compiled policy. The geo database
// is the small Larkbook test database (the embedded one takes seconds to
// compile against under the race detector).
const canaryConfig = `geo:
  databases: [../../testdata/geo/larkbook-city.mmdb]
records:
  - name: shop.example.com
    type: A
    ttl: 60
    pools:
      stable: { address: 192.0.2.30 }
      canary: { address: 192.0.2.31 }
    rules:
      - default:
          split:
            - { pool: stable, weight: 95 }
            - { pool: canary, weight: 5 }
`

// canaryScenario is a small canary population: one big cache with 20 %
// of the users, 100 small ones with the rest.
const canaryScenario = `duration: 1h
bin: 1m
runs: 3
record: shop.example.com
clients:
  - name: americas
    prefixes: [24.0.0.0/16]
    rate: 1000
resolvers:
  - name: bigpublic
    share: 0.2
  - name: isp
    share: 0.8
    count: 100
`

var (
	baseOnce sync.Once
	baseVal  simulate.Base
	baseErr  error
)

// canaryBase is canaryConfig compiled, as a node serves it (built once
// per test binary: the table is only read).
func canaryBase(t *testing.T) simulate.Base {
	t.Helper()
	baseOnce.Do(func() {
		cfg, err := config.Parse(nil, "steer.yaml", []byte(canaryConfig))
		if err != nil {
			baseErr = err
			return
		}
		d, err := geo.Open(cfg.Resolve(cfg.Geo.Databases[0]))
		if err != nil {
			baseErr = err
			return
		}
		set := &geo.Set{DBs: []*geo.Database{d}}
		table, _, err := policy.Build(cfg, set)
		if err != nil {
			baseErr = err
			return
		}
		baseVal = simulate.Base{Config: cfg, Geo: set, Table: table}
	})
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	return baseVal
}

// simFake is a Backend that also simulates, against canaryBase; gate,
// when set, holds SimulateBase until it is closed.
type simFake struct {
	fake
	t     *testing.T
	gate  chan struct{}
	calls chan struct{}
	err   error
}

func (f *simFake) SimulateBase() (simulate.Base, error) {
	if f.calls != nil {
		f.calls <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.err != nil {
		return simulate.Base{}, f.err
	}
	b := canaryBase(f.t)
	// The API must refuse config events whatever the backend gives.
	b.LoadConfig = func(string) (*config.Config, error) {
		f.t.Error("a posted scenario loaded a configuration file")
		return nil, fmt.Errorf("no")
	}
	return b, nil
}

func TestSimulateRoute(t *testing.T) {
	// A backend that does not simulate has no route.
	jsonError(t, do(t, NewHandler(&fake{}, Options{}), "POST", "/v1/simulate", canaryScenario), 404)
	// The token is required as everywhere under /v1.
	h := NewHandler(&simFake{t: t}, Options{Token: "s3cret"})
	jsonError(t, do(t, h, "POST", "/v1/simulate", canaryScenario), 401)
	// As a change, it is refused where changes are refused (no token on
	// a public address): simulations cost CPU.
	h = NewHandler(&simFake{t: t}, Options{RefuseChanges: "changes refused"})
	jsonError(t, do(t, h, "POST", "/v1/simulate", canaryScenario), 403)
}

func TestSimulateBadRequests(t *testing.T) {
	h := NewHandler(&simFake{t: t}, Options{})
	post := func(body string, hdr ...string) *httptest.ResponseRecorder {
		return do(t, h, "POST", "/v1/simulate", body, hdr...)
	}
	if msg := jsonError(t, post(canaryScenario, "Content-Type", "text/csv"), http.StatusUnsupportedMediaType); !strings.Contains(msg, "text/csv") {
		t.Errorf("415: %q", msg)
	}
	if msg := jsonError(t, post(""), 400); !strings.Contains(msg, "empty") {
		t.Errorf("empty body: %q", msg)
	}
	// Over 256 KiB: 413, whatever the body is.
	big := canaryScenario + "# " + strings.Repeat("x", MaxSimulateBodyBytes) + "\n"
	if msg := jsonError(t, post(big, "Content-Type", "application/yaml"), 413); !strings.Contains(msg, "larger than") {
		t.Errorf("413: %q", msg)
	}
	// A bad scenario: 400 naming the line in "request".
	bad := canaryScenario + "events:\n  - { at: 10m, drain: nosuchpool }\n"
	msg := jsonError(t, post(bad, "Content-Type", "text/yaml"), 400)
	if !strings.Contains(msg, "request:16:") || !strings.Contains(msg, "nosuchpool") {
		t.Errorf("unknown pool at line 16: %q", msg)
	}
	syntax := "duration: 1h\nrecord: [\n"
	if msg := jsonError(t, post(syntax), 400); !strings.HasPrefix(msg, "request:") {
		t.Errorf("syntax error: %q", msg)
	}
	// A config event reads a file: refused, naming its line.
	cfgEvent := canaryScenario + "events:\n  - { at: 10m, config: other.yaml }\n"
	if msg := jsonError(t, post(cfgEvent), 400); !strings.Contains(msg, "request:16:") {
		t.Errorf("config event: %q", msg)
	}
	// Over a limit: 400 naming the limit and the line.
	for _, c := range []struct{ name, body, want string }{
		{"runs", strings.Replace(canaryScenario, "runs: 3", "runs: 51", 1), "50"},
		{"duration", strings.Replace(canaryScenario, "duration: 1h", "duration: 8d", 1), "168h"},
		{"bins", strings.Replace(strings.Replace(canaryScenario, "bin: 1m", "bin: 10s", 1), "duration: 1h", "duration: 3d", 1), "20"},
		{"subnets", strings.Replace(canaryScenario, "prefixes: [24.0.0.0/16]", "prefixes: [24.0.0.0/8]", 1), "20"},
	} {
		w := post(c.body)
		msg := jsonError(t, w, 400)
		if !strings.Contains(msg, "request:") || !strings.Contains(msg, c.want) {
			t.Errorf("over the %s limit: %q, want the line and %q", c.name, msg, c.want)
		}
	}
}

// One simulation at a time: a second request while one runs gets 429
// with Retry-After.
func TestSimulateOneAtATime(t *testing.T) {
	f := &simFake{t: t, gate: make(chan struct{}), calls: make(chan struct{}, 2), err: fmt.Errorf("stopped: %w", ErrNotFound)}
	h := NewHandler(f, Options{})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- do(t, h, "POST", "/v1/simulate", canaryScenario) }()
	select {
	case <-f.calls: // the first holds the slot
	case <-time.After(5 * time.Second):
		t.Fatal("the first simulation did not start")
	}
	w := do(t, h, "POST", "/v1/simulate", canaryScenario)
	jsonError(t, w, http.StatusTooManyRequests)
	if w.Header().Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(f.gate)
	jsonError(t, <-first, 404) // the backend's ErrNotFound
	// The slot is free again.
	jsonError(t, do(t, h, "POST", "/v1/simulate", canaryScenario), 404)
}
