package api

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/latency"
)

func (f *fake) PushLatency(format string, body io.Reader) (LatencyResult, error) {
	var ms []latency.Measurement
	var err error
	if format == LatencyCSV {
		ms, err = latency.ParseCSV("body", body)
	} else {
		ms, err = latency.ParseJSON("body", body)
	}
	if err != nil {
		return LatencyResult{}, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes = append(f.pushes, ms)
	return LatencyResult{Applied: len(ms), Update: uint64(len(f.pushes))}, nil
}

func (f *fake) LatencyStatus() LatencyStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return LatencyStatus{Update: uint64(len(f.pushes))}
}

func TestLatencyPush(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{Token: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	good := `[{"key":"192.0.2.0/24","site":"mumbai","rtt_ms":40,"samples":10,"measured_at":"2026-11-30T10:00:00Z"},
	          {"key":"IN","site":"frankfurt","rtt_ms":150,"samples":3,"measured_at":"2026-11-30T10:00:00Z"}]`
	// Unauthenticated: refused, nothing applied.
	jsonError(t, do(t, h, "POST", "/v1/latency", good), 401)
	if len(f.pushes) != 0 {
		t.Fatal("an unauthenticated push was applied")
	}
	w := do(t, h, "POST", "/v1/latency", good, append(auth, "Content-Type", "application/json")...)
	if w.Code != 200 {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	var res LatencyResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || res.Applied != 2 || res.Update != 1 {
		t.Fatalf("result %s (%v)", w.Body, err)
	}
	// CSV by Content-Type.
	csv := "key,site,rtt_ms,samples,measured_at\n192.0.2.0/24,virginia,230,5,2026-11-30T10:00:00Z\n"
	if w := do(t, h, "POST", "/v1/latency", csv, append(auth, "Content-Type", "text/csv; charset=utf-8")...); w.Code != 200 {
		t.Fatalf("csv push: %d %s", w.Code, w.Body)
	}
	// A bad entry anywhere: 400 naming it, nothing of the batch applied.
	bad := strings.Replace(good, `"rtt_ms":150`, `"rtt_ms":-1`, 1)
	msg := jsonError(t, do(t, h, "POST", "/v1/latency", bad, auth...), 400)
	if !strings.Contains(msg, "[1]") || !strings.Contains(msg, "rtt_ms") {
		t.Errorf("bad push message %q does not name the entry and field", msg)
	}
	msg = jsonError(t, do(t, h, "POST", "/v1/latency", "mumbai,1\n", append(auth, "Content-Type", "text/csv")...), 400)
	if !strings.Contains(msg, "body:1:") {
		t.Errorf("bad CSV message %q does not name the line", msg)
	}
	jsonError(t, do(t, h, "POST", "/v1/latency", good, append(auth, "Content-Type", "text/plain")...), 415)
	if n := len(f.pushes); n != 2 {
		t.Fatalf("%d pushes applied, want 2", n)
	}
	// Larger than the general body limit is fine here.
	var b strings.Builder
	b.WriteString("[")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"key":"10.%d.%d.0/24","site":"mumbai","rtt_ms":40,"samples":1,"measured_at":"2026-11-30T10:00:00Z"}`, i/256, i%256)
	}
	b.WriteString("]")
	if b.Len() <= MaxBodyBytes {
		t.Fatalf("test body %d bytes is not over the general limit", b.Len())
	}
	if w := do(t, h, "POST", "/v1/latency", b.String(), auth...); w.Code != 200 {
		t.Fatalf("large push: %d %s", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/v1/latency", "", auth...); w.Code != 200 || !strings.Contains(w.Body.String(), `"update": 3`) {
		t.Fatalf("status: %d %s", w.Code, w.Body)
	}
}
