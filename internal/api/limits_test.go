package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

// authLines are the log's lines about failed authentication.
func authLines(buf *dnstest.LockedBuffer) []string {
	var out []string
	for _, s := range strings.Split(buf.String(), "\n") {
		if strings.Contains(s, "authentication failed") {
			out = append(out, s)
		}
	}
	return out
}

// A hundred guesses at the token write one log line; the next line, a
// window later, says how many were not logged.
func TestAuthFailuresLoggedAtBoundedRate(t *testing.T) {
	var buf dnstest.LockedBuffer
	h := NewHandler(&fake{ready: true}, Options{Token: "tok", Log: slog.New(slog.NewTextHandler(&buf, nil))})
	now := time.Unix(1_000_000, 0)
	h.s.fails.now = func() time.Time { return now }
	for i := range 100 {
		hdr := []string{"Authorization", "Bearer bad"}
		if i%2 == 0 {
			hdr = nil // no token at all
		}
		r := do(t, h, "GET", "/v1/status", "", hdr...)
		if r.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i, r.Code)
		}
	}
	if got := authLines(&buf); len(got) != 1 {
		t.Fatalf("100 failed attempts in one window logged %d lines, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	if r := do(t, h, "GET", "/v1/status", "", "Authorization", "Bearer tok"); r.Code != http.StatusOK {
		t.Fatalf("right token: %d", r.Code)
	}
	now = now.Add(authFailureWindow)
	do(t, h, "GET", "/v1/status", "", "Authorization", "Bearer bad")
	got := authLines(&buf)
	if len(got) != 2 || !strings.Contains(got[1], "not_logged_since_last=99") {
		t.Fatalf("after the window: %d lines, want 2, the second saying 99 were not logged:\n%s", len(got), strings.Join(got, "\n"))
	}
	if h.s.fails.total != 101 {
		t.Fatalf("counted %d failures, want 101", h.s.fails.total)
	}
}

// Beyond max connections, a client waits until one closes: idle clients
// cannot hold all of the node's descriptors.
func TestServeConnectionCap(t *testing.T) {
	h := NewHandler(&fake{ready: true}, Options{})
	addr, stop, err := Serve(context.Background(), "127.0.0.1:0", h, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background())
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// Both idle connections are accepted: a request on a third waits.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	get := func(timeout time.Duration) error {
		cl := &http.Client{Transport: tr, Timeout: timeout}
		resp, err := cl.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(300 * time.Millisecond); err == nil {
		t.Fatal("a third connection was served while two were held open (cap 2)")
	}
	idle[0].Close()
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("after one connection closed: %v", err)
	}
}
