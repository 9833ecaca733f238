package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// fakeAnycast is a Backend with anycast.
type fakeAnycast struct {
	fake
	configured bool
	controls   []string
}

func (f *fakeAnycast) Anycast() (*AnycastStatus, error) {
	if !f.configured {
		return nil, fmt.Errorf("anycast is not configured: %w", ErrNotFound)
	}
	ctl := "auto"
	if n := len(f.controls); n > 0 {
		ctl = f.controls[n-1]
	}
	return &AnycastStatus{Mode: "active", Control: ctl, Announced: ctl != "withdraw", Prefixes: []string{"192.0.2.0/24"},
		Peers: []AnycastPeer{{Address: "127.0.53.1", RemoteAS: 64510, State: "established"}}}, nil
}

func (f *fakeAnycast) SetAnycastControl(c string) (*AnycastStatus, error) {
	if !f.configured {
		return nil, fmt.Errorf("anycast is not configured: %w", ErrNotFound)
	}
	if c == "explode" {
		return nil, errors.New("boom")
	}
	f.controls = append(f.controls, c)
	return f.Anycast()
}

func TestAnycastEndpoints(t *testing.T) {
	f := &fakeAnycast{configured: true}
	h := NewHandler(f, Options{Token: "secret"})
	auth := []string{"Authorization", "Bearer secret"}
	if w := do(t, h, "GET", "/v1/anycast", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", w.Code)
	}
	if w := do(t, h, "POST", "/v1/anycast/withdraw", ""); w.Code != http.StatusUnauthorized || len(f.controls) != 0 {
		t.Fatalf("withdraw without a token: %d, controls %v", w.Code, f.controls)
	}
	w := do(t, h, "GET", "/v1/anycast", "", auth...)
	var st AnycastStatus
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Peers[0].State != "established" || !st.Announced {
		t.Fatalf("GET /v1/anycast: %d %s", w.Code, w.Body)
	}
	for _, c := range []string{"withdraw", "announce", "auto"} {
		w := do(t, h, "POST", "/v1/anycast/"+c, "", auth...)
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Control != c {
			t.Fatalf("POST %s: %d %s", c, w.Code, w.Body)
		}
	}
	if w := do(t, h, "GET", "/v1/anycast/withdraw", "", auth...); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET on a POST endpoint: %d", w.Code)
	}
	if w := do(t, h, "POST", "/v1/anycast/sideways", "", auth...); w.Code != http.StatusNotFound {
		t.Errorf("unknown control: %d", w.Code)
	}
	if len(f.controls) != 3 {
		t.Errorf("controls %v", f.controls)
	}

	f.configured = false
	jsonError(t, do(t, h, "GET", "/v1/anycast", "", auth...), http.StatusNotFound)
	jsonError(t, do(t, h, "POST", "/v1/anycast/announce", "", auth...), http.StatusNotFound)

	// A backend without anycast has no such endpoints.
	plain := NewHandler(&fake{}, Options{})
	jsonError(t, do(t, plain, "GET", "/v1/anycast", ""), http.StatusNotFound)
}
