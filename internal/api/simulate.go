package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime"
	"time"

	"github.com/steer-dns/steer/internal/simulate"
)

// SimulateBackend is implemented by a Backend that can run a simulation
// against what it serves; NewHandler then serves POST /v1/simulate.
type SimulateBackend interface {
	// SimulateBase is what a posted scenario runs against: the served
	// configuration, its geo databases and its compiled policies. Its
	// LoadConfig is nil (a posted scenario names no files); the API sets
	// the limits. ErrNotFound when nothing is steered.
	SimulateBase() (simulate.Base, error)
}

// The bounds of POST /v1/simulate: the node is serving DNS while it
// simulates, so a request is small, runs alone and ends in seconds.
const (
	// MaxSimulateBodyBytes is the largest scenario accepted (413 above).
	MaxSimulateBodyBytes = 256 << 10
	// DefaultSimulateTimeout is the wall time a simulation may take.
	DefaultSimulateTimeout = 10 * time.Second
	// simulateRetryAfter is the Retry-After of a 429: about the time a
	// running simulation may still take.
	simulateRetryAfter = "10"
)

// SimulateLimits bound a posted scenario's size; Compile refuses one
// beyond them, naming the limit and the line.
var SimulateLimits = simulate.Limits{
	MaxSubnets:   20_000,
	MaxResolvers: 20_000,
	MaxRuns:      50,
	MaxBins:      20_000,
	MaxDuration:  7 * 24 * time.Hour,
}

// SimulateResponse is the body of a successful POST /v1/simulate.
type SimulateResponse struct {
	// Result is the prediction, as steer simulate writes it to
	// result.json.
	Result simulate.ResultJSON `json:"result"`
	// Summary is the one-page text steer simulate prints.
	Summary string `json:"summary"`
}

// simulateState is what POST /v1/simulate keeps between requests: one
// simulation at a time, and its time bound.
type simulateState struct {
	busy    chan struct{} // holds a token while a simulation runs
	timeout time.Duration // DefaultSimulateTimeout; tests shorten it
	workers int           // engine goroutines; 0: half the CPUs
}

func (s *server) simulateRoutes() {
	sb, ok := s.b.(SimulateBackend)
	if !ok {
		return
	}
	s.sim = simulateState{busy: make(chan struct{}, 1), timeout: DefaultSimulateTimeout}
	s.mux.HandleFunc("POST /v1/simulate", func(w http.ResponseWriter, r *http.Request) { s.simulate(sb, w, r) })
}

// scenarioFormat checks the Content-Type: JSON or YAML (or none, read as
// YAML, of which JSON is a subset); the scenario parser reads both.
func scenarioFormat(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("bad Content-Type %q", ct)
	}
	switch mt {
	case "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return nil
	}
	return fmt.Errorf("Content-Type %q is neither application/json nor application/yaml (or text/yaml)", mt)
}

// simulate runs a posted scenario against the served configuration:
// 200 with the result and its summary; 400 naming the line
// ("request:12: ...") for a bad scenario or one over a limit; 413 for a
// body over MaxSimulateBodyBytes; 422 when it would take too long; 429
// while another simulation runs.
func (s *server) simulate(sb SimulateBackend, w http.ResponseWriter, r *http.Request) {
	if err := scenarioFormat(r); err != nil {
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("scenario larger than %d bytes: the API takes scenarios up to %d KiB; run a larger one with steer simulate", mbe.Limit, mbe.Limit>>10))
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(data) == 0 {
		writeError(w, http.StatusBadRequest, "empty body: post a scenario (YAML or JSON)")
		return
	}
	sc, err := simulate.ParseScenario("request", data)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	select {
	case s.sim.busy <- struct{}{}:
		defer func() { <-s.sim.busy }()
	default:
		w.Header().Set("Retry-After", simulateRetryAfter)
		writeError(w, http.StatusTooManyRequests, "another simulation is running: this node runs one at a time")
		return
	}
	base, err := sb.SimulateBase()
	if err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err.Error())
		return
	}
	base.LoadConfig = nil // a posted scenario reads no files: config events are refused
	base.Limits = SimulateLimits
	model, err := simulate.Compile(sc, base)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.sim.timeout)
	defer cancel()
	workers := s.sim.workers
	if workers == 0 {
		// Leave half the CPUs to the DNS server.
		workers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	start := time.Now()
	res, err := simulate.Run(ctx, model, simulate.Options{Workers: workers})
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, simulate.ErrTooLarge):
		why := fmt.Sprintf("took longer than %s", s.sim.timeout)
		if errors.Is(err, simulate.ErrTooLarge) {
			why = "is too large to run here"
		}
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("the simulation %s (%d runs of %s in %s bins): use fewer runs, a shorter duration, fewer client subnets or resolvers, or ECS sites with a shorter source prefix; or run it with steer simulate", why, model.Runs, model.Duration, model.Bin))
		s.log.Warn("admin API: simulation stopped", "err", err, "after", time.Since(start).Round(time.Millisecond), "remote", r.RemoteAddr)
		return
	case r.Context().Err() != nil:
		return // the client went away
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.log.Info("admin API: simulation", "record", res.Record, "runs", res.Runs, "bins", len(res.Bins), "took", time.Since(start).Round(time.Millisecond), "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, SimulateResponse{Result: res.JSON(), Summary: simulate.Summary(res)})
}
