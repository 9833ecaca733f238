package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// fakeKeys is a Backend keeping one zone's key plan.
type fakeKeys struct {
	fake
	rolls     []RollKSKRequest
	completes []CompleteKSKRequest
}

func (f *fakeKeys) KeyPlan(zone string) (KeyPlan, error) {
	if zone != "example.com" && zone != "example.com." {
		return KeyPlan{}, fmt.Errorf("no signed zone %s is served: %w", zone, ErrNotFound)
	}
	return KeyPlan{Zone: "example.com.", Keys: []PlanKey{{Tag: 1, Role: "csk", State: "active"}}, Source: "state directory"}, nil
}

func (f *fakeKeys) RollKSK(_ context.Context, zone string, req RollKSKRequest) (RollResult, error) {
	p, err := f.KeyPlan(zone)
	if req.Algorithm == "rot13" {
		return RollResult{}, fmt.Errorf("algorithm %q: %w", req.Algorithm, ErrBadInput)
	}
	f.rolls = append(f.rolls, req)
	return RollResult{Done: []string{"published KSK 2"}, Plan: p}, err
}

func (f *fakeKeys) CompleteKSK(_ context.Context, zone string, req CompleteKSKRequest) (RollResult, error) {
	p, err := f.KeyPlan(zone)
	f.completes = append(f.completes, req)
	return RollResult{Done: []string{"retired KSK 1"}, Plan: p}, err
}

// TestDNSSECEndpoints: the key plan routes need the token, answer 404
// naming a zone not served, 400 for a bad body, and pass the bodies on.
func TestDNSSECEndpoints(t *testing.T) {
	f := &fakeKeys{}
	h := NewHandler(f, Options{Token: "secret"})
	auth := []string{"Authorization", "Bearer secret"}
	if w := do(t, h, "GET", "/v1/dnssec/example.com", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", w.Code)
	}
	if w := do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk", ""); w.Code != http.StatusUnauthorized || len(f.rolls) != 0 {
		t.Fatalf("roll without a token: %d", w.Code)
	}
	w := do(t, h, "GET", "/v1/dnssec/example.com", "", auth...)
	var p KeyPlan
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Zone != "example.com." || len(p.Keys) != 1 {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	if msg := jsonError(t, do(t, h, "GET", "/v1/dnssec/exmaple.com", "", auth...), http.StatusNotFound); !strings.Contains(msg, "exmaple.com") {
		t.Errorf("typo: %q", msg)
	}
	if w := do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk", "", auth...); w.Code != 200 || len(f.rolls) != 1 {
		t.Fatalf("roll with an empty body: %d %s", w.Code, w.Body)
	}
	jsonError(t, do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk", `{"algorithm":"rot13"}`, auth...), http.StatusBadRequest)
	jsonError(t, do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk", `{"alg":"ed25519"}`, auth...), http.StatusBadRequest)
	jsonError(t, do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk/complete", "", auth...), http.StatusBadRequest)
	if w := do(t, h, "POST", "/v1/dnssec/example.com/roll-ksk/complete", `{"parent_ns":"192.0.2.1","tcp":true}`, auth...); w.Code != 200 ||
		len(f.completes) != 1 || f.completes[0].ParentNS != "192.0.2.1" || !f.completes[0].TCP {
		t.Fatalf("complete: %d %s %+v", w.Code, w.Body, f.completes)
	}
	jsonError(t, do(t, h, "POST", "/v1/dnssec/nope.example/roll-ksk/complete", `{"parent_ns":"192.0.2.1"}`, auth...), http.StatusNotFound)
	// Changes are refused where the node refuses them.
	ro := NewHandler(f, Options{RefuseChanges: "no token on a public address"})
	jsonError(t, do(t, ro, "POST", "/v1/dnssec/example.com/roll-ksk", ""), http.StatusForbidden)
	// A backend without plans has no such routes.
	jsonError(t, do(t, NewHandler(&fake{}, Options{}), "GET", "/v1/dnssec/example.com", ""), http.StatusNotFound)
}
