package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ZoneDNSSEC is a signed zone's signing state in GET /v1/status.
type ZoneDNSSEC struct {
	// Keys are the zone's keys, the SEP keys (KSK or CSK) first.
	Keys []DNSSECKey `json:"keys"`
	// Validity is how long a signature holds ("336h0m0s"), and Refresh
	// the share of it after which the node renews a signature.
	Validity string  `json:"validity"`
	Refresh  float64 `json:"refresh"`
	// EarliestExpiry is when the first of the zone's signatures expires;
	// NextRenewal is when the first falls due for renewal, which the node
	// does then in the background. Both are zero before the zone holds a
	// signature (SERVFAIL while it fails).
	EarliestExpiry time.Time `json:"earliest_expiry"`
	NextRenewal    time.Time `json:"next_renewal"`
	// Made counts the signatures made with the zone's keys since they
	// were loaded, by reason: load, renew, steered, online, denial.
	Made map[string]uint64 `json:"signatures_made"`
	// Expiring says, when set, that a signature expires within 48 hours
	// (a seventh of the validity when that is shorter): renewal is not
	// keeping up. The node logs the same at ERROR.
	Expiring string `json:"expiring,omitempty"`
	// NextKeyEvent is the zone's next key event (its key plan's), nil
	// when none is scheduled or the zone has no plan.
	NextKeyEvent *KeyEvent `json:"next_key_event,omitempty"`
	// RolloverHeld says, when set, why the zone's key rollover does not
	// proceed (on the node that drives the fleet's key plans: a
	// generated private key would go to a store that is not TLS and
	// authenticated); the zone is signed with its current keys.
	RolloverHeld string `json:"rollover_held,omitempty"`
}

// DNSSECKey is one key of a signed zone.
type DNSSECKey struct {
	Tag       uint16 `json:"tag"`
	Algorithm string `json:"algorithm"`
	// Role is CSK (one key signs everything), KSK or ZSK.
	Role string `json:"role"`
	// File is the key pair's base path (.key and .private).
	File string `json:"file"`
	// DS is the DS record (SHA-256) the parent publishes, for a SEP key.
	DS string `json:"ds,omitempty"`
	// State is the key's state: "active" (signing) or "published" (in
	// the DNSKEY RRset, not signing); with a key plan, the plan's
	// (PlanKey.State: generated, not yet published, published, active,
	// retired).
	State string `json:"state"`
}

// KeyPlan is GET /v1/dnssec/{zone}: a signed zone's keys with their
// timelines, the DS records its parent should publish and the next key
// event. It carries public keys only: no private key is ever in an API
// answer.
type KeyPlan struct {
	Zone string `json:"zone"`
	// Keys are every key of the zone's plan, removed ones included, in
	// the order they were added.
	Keys []PlanKey `json:"keys"`
	// ParentDS are the DS records (SHA-256) the parent should publish
	// now: those of the SEP keys the zone asks its parent to point at
	// (the CDS RRset at its apex).
	ParentDS []string `json:"parent_ds"`
	// Next is the next key event, nil when none is scheduled.
	Next *KeyEvent `json:"next,omitempty"`
	// Rolling says a KSK rollover is under way: the new KSK is
	// published and the old one waits for steer dnssec roll-ksk
	// --complete.
	Rolling *KSKRoll `json:"ksk_rollover,omitempty"`
	// Source is where the plan is kept: "state directory" (one node) or
	// "fleet" (the store, driven by Driver).
	Source string `json:"source"`
	Driver string `json:"driver,omitempty"`
	// Held says, when set, why the rollover does not proceed (see
	// ZoneDNSSEC.RolloverHeld).
	Held string `json:"held,omitempty"`
}

// PlanKey is one key of a plan.
type PlanKey struct {
	Tag       uint16 `json:"tag"`
	Role      string `json:"role"` // ksk, zsk or csk
	Algorithm string `json:"algorithm"`
	// State is the key's state now: "generated" (not yet published),
	// "published" (in the DNSKEY RRset, not signing), "active"
	// (signing), "retired" (published, no longer signing) or "removed".
	State string `json:"state"`
	// The key's times; nil when not scheduled.
	Publish *time.Time `json:"publish,omitempty"`
	Active  *time.Time `json:"active,omitempty"`
	Retire  *time.Time `json:"retire,omitempty"`
	Remove  *time.Time `json:"remove,omitempty"`
	// DNSKEY is the key's public record, as published.
	DNSKEY string `json:"dnskey"`
	// DS is its DS record (SHA-256), for a SEP key (KSK or CSK).
	DS string `json:"ds,omitempty"`
}

// KeyEvent is a scheduled change of a zone's keys.
type KeyEvent struct {
	Time time.Time `json:"time"`
	What string    `json:"what"` // "publish ZSK 12345", "retire KSK 4711", ...
}

// KSKRoll is a KSK rollover under way.
type KSKRoll struct {
	Old []uint16 `json:"old"` // the KSKs being rolled out
	New uint16   `json:"new"`
}

// RollKSKRequest is the body of POST /v1/dnssec/{zone}/roll-ksk.
type RollKSKRequest struct {
	// Algorithm of the new KSK ("ecdsap256sha256", "ed25519",
	// "rsasha256"); empty: the old KSK's.
	Algorithm string `json:"algorithm,omitempty"`
}

// CompleteKSKRequest is the body of POST
// /v1/dnssec/{zone}/roll-ksk/complete: the parent server whose DS RRset
// is checked for the new KSK before the old one is retired.
type CompleteKSKRequest struct {
	ParentNS string `json:"parent_ns"`
	TCP      bool   `json:"tcp,omitempty"`
	// Timeout is a Go duration ("5s"); empty: 5 s.
	Timeout string `json:"timeout,omitempty"`
}

// RollResult is the answer of both roll-ksk endpoints: the plan after the
// change and what was done, one line each.
type RollResult struct {
	Done []string `json:"done"`
	Plan KeyPlan  `json:"plan"`
}

// DNSSECBackend is implemented by a backend that keeps key plans: it has
// the /v1/dnssec/ routes.
type DNSSECBackend interface {
	// KeyPlan returns a signed zone's plan; ErrNotFound for a zone that
	// is not served, or not signed.
	KeyPlan(zone string) (KeyPlan, error)
	// RollKSK starts a KSK rollover; ErrBadInput when it cannot start
	// (one under way, a bad algorithm).
	RollKSK(ctx context.Context, zone string, req RollKSKRequest) (RollResult, error)
	// CompleteKSK checks the parent's DS and retires the old KSK;
	// ErrBadInput (naming what the parent has) when the parent does not
	// name the new KSK yet.
	CompleteKSK(ctx context.Context, zone string, req CompleteKSKRequest) (RollResult, error)
}

// dnssecRoutes registers the key plan routes when the Backend keeps them.
func (s *server) dnssecRoutes() {
	db, ok := s.b.(DNSSECBackend)
	if !ok {
		return
	}
	s.mux.HandleFunc("GET /v1/dnssec/{zone}", func(w http.ResponseWriter, r *http.Request) {
		p, err := db.KeyPlan(r.PathValue("zone"))
		if err != nil {
			writeBackendError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
	s.mux.HandleFunc("POST /v1/dnssec/{zone}/roll-ksk", func(w http.ResponseWriter, r *http.Request) {
		var req RollKSKRequest
		if !readJSONBody(w, r, &req, true) {
			return
		}
		res, err := db.RollKSK(r.Context(), r.PathValue("zone"), req)
		if err != nil {
			writeBackendError(w, err)
			return
		}
		s.log.Info("admin API: KSK rollover started", "zone", res.Plan.Zone, "remote", r.RemoteAddr, "done", strings.Join(res.Done, "; "))
		writeJSON(w, http.StatusOK, res)
	})
	s.mux.HandleFunc("POST /v1/dnssec/{zone}/roll-ksk/complete", func(w http.ResponseWriter, r *http.Request) {
		var req CompleteKSKRequest
		if !readJSONBody(w, r, &req, false) {
			return
		}
		res, err := db.CompleteKSK(r.Context(), r.PathValue("zone"), req)
		if err != nil {
			writeBackendError(w, err)
			return
		}
		s.log.Info("admin API: KSK rollover completed", "zone", res.Plan.Zone, "remote", r.RemoteAddr, "done", strings.Join(res.Done, "; "))
		writeJSON(w, http.StatusOK, res)
	})
}

// writeBackendError answers a Backend's error: 404 for ErrNotFound, 400
// for ErrBadInput, 500 otherwise.
func writeBackendError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrBadInput):
		code = http.StatusBadRequest
	}
	writeError(w, code, err.Error())
}

// readJSONBody decodes r's JSON body into v (unknown fields refused),
// answering 400 or 413 itself when it cannot; an empty body leaves v as
// it is when emptyOK.
func readJSONBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && emptyOK {
		return true
	}
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err != nil {
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
	return true
}
