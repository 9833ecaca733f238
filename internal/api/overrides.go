package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/health"
)

// Safety rules on overrides (config.Safety): a drain or down that would
// leave a record fewer usable pools than its rule is refused with 409
// naming the rule, unless forced; ?dry_run=1 says what an override would
// do without doing it; POST /v1/overrides applies several at once, all
// or none. A Backend that implements OverrideBackend gets every override
// through ApplyOverrides; one that does not gets the single ones through
// SetTargetState and SetPoolState, and no batches.

// Override is one override of a batch: of target address Target when it
// is valid, else of Record's Pool.
type Override struct {
	Target       netip.Addr
	Record, Pool string
	// State is up, down, drain or auto.
	State   string
	Expires time.Time
}

// OverrideOptions say how a batch is applied.
type OverrideOptions struct {
	// Force applies a batch a safety rule refuses (and logs it).
	Force bool
	// DryRun applies nothing: the result says what would happen.
	DryRun bool
	// Caller is the request's remote address, for the log.
	Caller string
}

// OverrideBackend is a Backend that applies overrides under safety rules.
type OverrideBackend interface {
	// ApplyOverrides checks every item and the safety rules against
	// their combined result, then applies all of them or none. An item
	// it cannot apply is an *ItemError; a safety rule's refusal a
	// *SafetyError; a fleet's store that did not take them a
	// *PendingError (applied on this node).
	ApplyOverrides(items []Override, o OverrideOptions) (OverrideResult, error)
}

// ForceReloader is a Backend whose reloads a safety rule may refuse
// (a pool disabled or weighted out that leaves a record below its rule):
// ReloadForced applies such a configuration anyway, logging caller.
type ForceReloader interface {
	ReloadForced(ctx context.Context, caller string) (ReloadResult, error)
}

// OverrideResult is what a batch did, or with dry_run would do.
type OverrideResult struct {
	DryRun  bool `json:"dry_run,omitempty"`
	Applied bool `json:"applied"`
	// Refused is, for a dry run, the reason the batch would be refused
	// without force.
	Refused string `json:"refused,omitempty"`
	// Forced lists the safety rules a forced batch went past.
	Forced []string `json:"forced,omitempty"`
	// Records are the records whose usable pools the batch changes.
	Records []RecordEffect `json:"records"`
}

// RecordEffect is what a batch does to one record.
type RecordEffect struct {
	Record string `json:"record"`
	// Rule is the safety rule that applies to it, if any, with where it
	// is declared ("min_usable 2 (record rule at steer.yaml:14)").
	Rule         string   `json:"rule,omitempty"`
	UsableBefore []string `json:"usable_before"`
	UsableAfter  []string `json:"usable_after"`
	// BelowRule: the batch leaves the record fewer usable pools than its
	// rule (and fewer than before).
	BelowRule bool `json:"below_rule,omitempty"`
	// Window is the span of answers Answers and Moving are taken from
	// (up to the last 5 minutes; shorter on a node up for less).
	Window string `json:"window,omitempty"`
	// Answers counts the record's answers in the window, per pool they
	// named (in a fleet, every node's).
	Answers uint64 `json:"answers"`
	// Moving is the share of them that would have gone elsewhere: the
	// answers of the pools that stop being usable.
	Moving float64 `json:"moving"`
	// MovingTo spreads Moving over the pools that would take those
	// answers (estimated by each rule's action; geoproximity and latency
	// by their fallback order). "none" is answers no usable pool would
	// take (when_all_down decides them).
	MovingTo map[string]float64 `json:"moving_to,omitempty"`
}

// ItemError says which item of a batch cannot be applied, and why.
type ItemError struct {
	Item int // from 1
	Err  error
}

func (e *ItemError) Error() string { return fmt.Sprintf("item %d: %v", e.Item, e.Err) }
func (e *ItemError) Unwrap() error { return e.Err }

// SafetyError is a safety rule's refusal: the message names the rule,
// where it is declared, the records and what would remain usable.
type SafetyError struct {
	Msg    string
	Result OverrideResult
}

func (e *SafetyError) Error() string { return e.Msg }

// overrideBody is one item of POST /v1/overrides.
type overrideBody struct {
	Target  string `json:"target,omitempty"`
	Record  string `json:"record,omitempty"`
	Pool    string `json:"pool,omitempty"`
	State   string `json:"state"`
	Expires string `json:"expires,omitempty"`
}

// batchBody is the body of POST /v1/overrides.
type batchBody struct {
	Overrides []overrideBody `json:"overrides"`
	Force     bool           `json:"force,omitempty"`
}

// MaxBatch bounds the overrides of one batch.
const MaxBatch = 1000

func (s *server) overrideRoutes() {
	s.mux.HandleFunc("POST /v1/overrides", s.postOverrides)
}

// dryRun reads ?dry_run= (1, true; 0, false; empty: no).
func dryRun(r *http.Request) (bool, error) {
	v := strings.TrimSpace(r.URL.Query().Get("dry_run"))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("bad dry_run %q (1 or 0)", v)
	}
	return b, nil
}

func (s *server) postOverrides(w http.ResponseWriter, r *http.Request) {
	ob, ok := s.b.(OverrideBackend)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this server applies no batches of overrides")
		return
	}
	dry, err := dryRun(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var body batchBody
	if !decodeStrict(w, r, &body) {
		return
	}
	if len(body.Overrides) == 0 {
		writeError(w, http.StatusBadRequest, "overrides: the batch is empty")
		return
	}
	if len(body.Overrides) > MaxBatch {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("overrides: %d items; at most %d in one batch", len(body.Overrides), MaxBatch))
		return
	}
	now := time.Now()
	items := make([]Override, len(body.Overrides))
	for i, it := range body.Overrides {
		o, err := parseItem(it, now)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("overrides item %d: %v", i+1, err))
			return
		}
		items[i] = o
	}
	s.applyOverrides(w, ob, items, OverrideOptions{Force: body.Force, DryRun: dry, Caller: r.RemoteAddr}, true)
}

// parseItem checks one item of a batch.
func parseItem(it overrideBody, now time.Time) (Override, error) {
	o := Override{Record: strings.TrimSpace(it.Record), Pool: strings.TrimSpace(it.Pool)}
	t := strings.TrimSpace(it.Target)
	switch {
	case t != "" && (o.Record != "" || o.Pool != ""):
		return o, errors.New("give target, or record and pool, not both")
	case t != "":
		a, err := netip.ParseAddr(t)
		if err != nil || a.Zone() != "" {
			return o, fmt.Errorf("bad target address %q", t)
		}
		o.Target = a
	case o.Record == "" || o.Pool == "":
		return o, errors.New("give target (an address), or record and pool")
	}
	o.State = strings.ToLower(strings.TrimSpace(it.State))
	if !validStates[o.State] {
		return o, fmt.Errorf("bad state %q: want up, down, drain or auto", it.State)
	}
	exp, err := health.ParseExpires(it.Expires, now)
	if err != nil {
		return o, err
	}
	o.Expires = exp
	return o, nil
}

// applyOverrides applies items through ob and answers: 200 with the
// result for a dry run, a forced batch or a batch (batch set), 204 for a
// single override applied as asked; 409 for a safety rule's refusal, 202
// when a fleet's store has not taken it yet, 404/400 naming the item.
func (s *server) applyOverrides(w http.ResponseWriter, ob OverrideBackend, items []Override, o OverrideOptions, batch bool) {
	res, err := ob.ApplyOverrides(items, o)
	var se *SafetyError
	var pe *PendingError
	switch {
	case errors.As(err, &se):
		s.log.Info("admin API: override refused by a safety rule", "why", se.Msg, "remote", o.Caller)
		writeJSON(w, http.StatusConflict, struct {
			Error string `json:"error"`
			OverrideResult
		}{se.Msg, se.Result})
	case errors.As(err, &pe):
		s.log.Warn("admin API: overrides set on this node only for now", "err", err, "remote", o.Caller)
		writeJSON(w, http.StatusAccepted, struct {
			Applied string `json:"applied"`
			Pending string `json:"pending"`
			Reason  string `json:"reason"`
			OverrideResult
		}{"this node", pe.Where, pe.Reason, res})
	case err != nil:
		code := http.StatusBadRequest
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		var ie *ItemError
		if !batch && errors.As(err, &ie) {
			err = ie.Err // one override: the path names it
		}
		writeError(w, code, err.Error())
	case !batch && !o.DryRun && len(res.Forced) == 0:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// decodeStrict decodes one JSON object from r's body into v (no unknown
// fields, nothing after it), writing the error response itself when it
// fails.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			}
		}
	}
	if err == nil {
		return true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit))
		return false
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	writeError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
	return false
}
