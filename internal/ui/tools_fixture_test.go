package ui_test

// A fixture server for working on the explain, change-preview and fleet
// pages by hand before (or without) a node that serves every dashboard
// endpoint: it serves the assets with a session, answers /v1/overview,
// /v1/records/NAME and /v1/fleet from the fixtures below and passes
// /v1/explain, /v1/simulate and the pool state PUT to a running node
// (STEER_UI_UPSTREAM, e.g. http://127.0.0.1:28053, with the bearer token
// STEER_UI_TOKEN when it has one), or answers them from fixtures too. Run it with
//
//	STEER_UI_FIXTURE=127.0.0.1:28080 STEER_UI_UPSTREAM=http://127.0.0.1:28053 \
//	  go test ./internal/ui/ -run TestToolsFixtureServer -timeout 0
//
// and open http://127.0.0.1:28080/ui/#/fleet (STEER_UI_NOFLEET=1: the
// node is not in a fleet; STEER_UI_ASSETS=internal/ui/assets: serve the
// files as edited, not the embedded copy; STEER_UI_EVENTS=1: keep
// /v1/events open, which headless --virtual-time-budget runs never end). The browser tests proper run against a real
// steer serve (the uitest helper's); TestToolsFixturesAreWireTypes keeps
// the fixtures in the API's shape.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/simulate"
	"github.com/steer-dns/steer/internal/ui"
)

func toolsFleet(now time.Time) api.FleetView {
	at := func(d time.Duration) time.Time { return now.Add(-d).UTC().Truncate(time.Second) }
	return api.FleetView{
		Node:   "fra-1",
		Prefix: "/steer/v1/",
		Nodes: []api.FleetNodeView{
			{Name: "fra-1", Region: "eu", Digest: "sha256:9f2c41d0a7be33e1c5a9d2f07e11b4c6a0d8e2f3b5c7d9e1f3a5b7c9d1e3f5a7", Serial: 42, ViewAt: at(2 * time.Second), ViewAge: "2s", HealthMode: "quorum"},
			{Name: "bom-1", Region: "ap", Digest: "sha256:9f2c41d0a7be33e1c5a9d2f07e11b4c6a0d8e2f3b5c7d9e1f3a5b7c9d1e3f5a7", Serial: 42, ViewAt: at(3 * time.Second), ViewAge: "3s", HealthMode: "quorum"},
			{Name: "iad-1", Region: "us", Digest: "sha256:1b0e77aa29c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e", Serial: 41, Canary: true, ViewAt: at(95 * time.Second), ViewAge: "1m35s",
				HealthMode: "frozen since 2026-12-02 19:58:00 UTC", Error: "bundle 42: geo database larkbook-city.mmdb: checksum mismatch", Warning: "view older than 60s", Pending: 2},
		},
		Targets: []api.FleetTarget{
			{Target: "203.0.113.10:443/https", Verdict: "up", Observers: []api.ObserverVerdict{
				{Node: "fra-1", Region: "eu", State: "up", At: at(4 * time.Second)},
				{Node: "bom-1", Region: "ap", State: "up", At: at(3 * time.Second)},
				{Node: "iad-1", Region: "us", State: "up", At: at(80 * time.Second), Stale: true},
			}},
			{Target: "198.51.100.20:443/https", Verdict: "down", Observers: []api.ObserverVerdict{
				{Node: "fra-1", Region: "eu", State: "down", Reason: "connect: connection refused", At: at(2 * time.Second)},
				{Node: "bom-1", Region: "ap", State: "down", Reason: "timeout after 2s", At: at(5 * time.Second)},
				{Node: "iad-1", Region: "us", State: "up", At: at(6 * time.Second)},
			}},
			{Target: "192.0.2.30:80/http", Verdict: "up", Observers: []api.ObserverVerdict{
				{Node: "fra-1", Region: "eu", State: "up", At: at(2 * time.Second)},
				{Node: "iad-1", Region: "us", State: "up", At: at(7 * time.Second)},
			}},
		},
		Errors: []string{"node iad-1 serves bundle 41, not 42"},
	}
}

func toolsOverview(now time.Time) api.Overview {
	t := true
	pools := []api.OverviewPool{
		{Name: "ap-south", State: "up", Since: now.Add(-time.Hour).UTC(), Share5m: 0.7, Share1h: 0.7, Targets: 1, TargetsUp: 1},
		{Name: "eu-central", State: "down", Reason: "connect: connection refused", Since: now.Add(-3 * time.Minute).UTC(), NoTraffic: "down: connect: connection refused", Targets: 1},
		{Name: "us-east", State: "up", Since: now.Add(-time.Hour).UTC(), Share5m: 0.28, Share1h: 0.28, Targets: 1, TargetsUp: 1},
		{Name: "us-east-canary", State: "drain", Reason: "override", Override: true, Since: now.Add(-2 * time.Minute).UTC(), DrainSafe: &t, NoTraffic: "drained", Targets: 1, TargetsUp: 1},
	}
	return api.Overview{
		Generated: now.UTC(), Covered5m: "5m", Covered1h: "1h", Total: 1, States: map[string]int{"up": 2, "down": 1, "drain": 1},
		Records: []api.OverviewRecord{{Name: "shop.example.com.", Type: "A", TTL: 60, Pools: pools}},
		Map:     []api.MapPoint{},
	}
}

func toolsRecord(now time.Time) api.RecordDetail {
	ov := toolsOverview(now)
	return api.RecordDetail{
		OverviewRecord: ov.Records[0],
		Config:         "- name: shop.example.com\n  type: A\n",
		Rules: []api.RuleDetail{
			{Index: 1, Match: "country IN, LK, BD, NP", Action: "pool ap-south"},
			{Index: 2, Match: "continent EU", Action: "pool eu-central"},
			{Index: 3, Match: "continent NA, SA", Action: "split us-east 95, us-east-canary 5"},
			{Index: 4, Match: "default", Action: "geoproximity over ap-south, eu-central, us-east"},
		},
		Scopes: []api.ScopeHistogram{},
	}
}

// TestToolsFixturesAreWireTypes decodes the fixtures strictly into the
// API's types: a renamed or removed field fails here.
func TestToolsFixturesAreWireTypes(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		v   any
		out any
	}{
		{toolsFleet(now), &api.FleetView{}},
		{toolsOverview(now), &api.Overview{}},
		{toolsRecord(now), &api.RecordDetail{}},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(c.out); err != nil {
			t.Errorf("%T: %v", c.v, err)
		}
	}
	// The pages the fixtures feed are in the embedded assets.
	for _, f := range []string{"explain.js", "preview.js", "fleet.js", "fmt.js", "api.js", "app.js"} {
		b, err := fsRead(f)
		if err != nil || len(b) == 0 {
			t.Errorf("asset %s: %v", f, err)
		}
	}
}

func fsRead(name string) ([]byte, error) {
	f, err := ui.Assets().Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func TestToolsFixtureServer(t *testing.T) {
	addr := os.Getenv("STEER_UI_FIXTURE")
	if addr == "" {
		t.Skip("STEER_UI_FIXTURE=host:port serves the fixture for working by hand")
	}
	f := &toolsFixture{noFleet: os.Getenv("STEER_UI_NOFLEET") != "", events: os.Getenv("STEER_UI_EVENTS") != "",
		upstream: os.Getenv("STEER_UI_UPSTREAM"), token: os.Getenv("STEER_UI_TOKEN"), simulate: 200}
	t.Logf("fixture at http://%s/ui/", addr)
	t.Fatal(http.ListenAndServe(addr, f.handler(t, ovAssets())))
}

// toolsFixture is the fixture API of the explain, preview and fleet
// pages. Without an upstream it answers explain, simulate and the pool
// state PUT itself, and records what the pages sent.
type toolsFixture struct {
	noFleet, events bool
	upstream, token string
	simulate        int // the status of POST /v1/simulate without an upstream: 200 or an error

	mu   sync.Mutex
	sent []toolsRequest
}

// toolsRequest is a request the pages made.
type toolsRequest struct {
	Method, Path, Query, CSRF, Body string
}

func (f *toolsFixture) requests(method string) []toolsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []toolsRequest
	for _, r := range f.sent {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func (f *toolsFixture) handler(t testing.TB, assets http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", assets)
	mux.HandleFunc("GET /ui/session", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]string{"csrf": "fixture-csrf"})
	})
	mux.HandleFunc("GET /v1/overview", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, toolsOverview(time.Now())) })
	mux.HandleFunc("GET /v1/records/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.PathValue("name"), "shop.example.com") {
			writeJSON(w, 404, map[string]string{"error": "no steered record " + r.PathValue("name")})
			return
		}
		writeJSON(w, 200, toolsRecord(time.Now()))
	})
	mux.HandleFunc("GET /v1/fleet", func(w http.ResponseWriter, r *http.Request) {
		if f.noFleet {
			writeJSON(w, 404, map[string]string{"error": "not in a fleet"})
			return
		}
		writeJSON(w, 200, toolsFleet(time.Now()))
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if !f.events {
			// An open stream keeps headless chromium's virtual time
			// from running out (--virtual-time-budget never ends).
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(20 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				io.WriteString(w, "data: {\"kind\":\"health\"}\n\n")
				w.(http.Flusher).Flush()
			}
		}
	})
	record := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			f.mu.Lock()
			f.sent = append(f.sent, toolsRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-CSRF-Token"), string(body)})
			f.mu.Unlock()
			if r.Method != http.MethodGet && r.Header.Get("X-CSRF-Token") != "fixture-csrf" {
				writeJSON(w, 403, map[string]string{"error": "missing or bad CSRF token"})
				return
			}
			h(w, r)
		}
	}
	if f.upstream != "" {
		u, err := url.Parse(f.upstream)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(u)
		if f.token != "" {
			// The upstream's API token (its api.token_file's content).
			director := proxy.Director
			proxy.Director = func(r *http.Request) {
				director(r)
				r.Header.Set("Authorization", "Bearer "+f.token)
			}
		}
		mux.Handle("GET /v1/explain", record(proxy.ServeHTTP))
		mux.Handle("POST /v1/simulate", record(proxy.ServeHTTP))
		mux.Handle("PUT /v1/records/{name}/pools/{pool}/state", record(proxy.ServeHTTP))
		return mux
	}
	mux.HandleFunc("GET /v1/explain", record(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if e := q.Get("ecs"); e != "" {
			if _, err := netip.ParsePrefix(e); err != nil {
				writeJSON(w, 400, map[string]string{"error": fmt.Sprintf("bad ecs prefix %q", e)})
				return
			}
		}
		writeJSON(w, 200, toolsExplain(q.Get("ecs")))
	}))
	if f.simulate != 0 {
		mux.HandleFunc("POST /v1/simulate", record(func(w http.ResponseWriter, r *http.Request) {
			if f.simulate != 200 {
				writeJSON(w, f.simulate, map[string]string{"error": "nothing to simulate"})
				return
			}
			var sc struct {
				Events []map[string]any `json:"events"`
			}
			json.NewDecoder(r.Body).Decode(&sc)
			writeJSON(w, 200, toolsSimulation(sc.Events))
		}))
	}
	mux.HandleFunc("PUT /v1/records/{name}/pools/{pool}/state", record(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("pool") == "us-east-canary" {
			writeJSON(w, 202, map[string]string{"applied": "this node", "pending": "fleet", "reason": "the store is unreachable"})
			return
		}
		w.WriteHeader(204)
	}))
	return mux
}

// toolsExplain is a report as GET /v1/explain answers it.
func toolsExplain(ecs string) explain.Report {
	ttl, scope := uint32(60), 13
	return explain.Report{
		Query: "shop.example.com. A",
		Input: explain.Input{ECS: ecs, Resolver: "127.0.0.1", Used: ecs, SteeredBy: "ECS " + ecs},
		Steer: []explain.Step{{
			Record: "shop.example.com. A", Client: ecs,
			Geo: explain.GeoInfo{Country: "IN", Continent: "AS", Location: "21.0000,78.0000 (country centroid)", Networks: []string{"49.32.0.0/13 in embedded"},
				Facts: []policy.Fact{{Key: "country", Value: "IN"}, {Key: "continent", Value: "AS"}}},
			Rules: []policy.RuleTrace{
				{Rule: 1, Line: 25, Source: "client", Matched: true, Why: []string{"country IN is in [IN LK BD NP]"}, Action: "pool ap-south"},
				{Rule: 2, Line: 27, Source: "client", Why: []string{"continent AS is not in [EU]"}, Action: "pool eu-central"},
			},
			Pools: []explain.PoolState{
				{Name: "ap-south", Addresses: []string{"203.0.113.10"}, State: "up"},
				{Name: "eu-central", Addresses: []string{"198.51.100.20"}, State: "down (connect: connection refused)"},
			},
			Decision: "rule 1 (line 25) decides: pool ap-south -> ap-south",
			Chosen:   []string{"ap-south"},
			Scope:    13,
		}},
		Rcode:  "NOERROR",
		Answer: []string{"shop.example.com.\t60\tIN\tA\t203.0.113.10", "shop.example.com.\t60\tIN\tA\t203.0.113.11"},
		TTL:    &ttl,
		Scope:  &scope,
	}
}

// toolsSimulation is a POST /v1/simulate answer: the changed pool's
// share falls to 0 a minute after the change at 10 minutes.
func toolsSimulation(events []map[string]any) api.SimulateResponse {
	pools := []string{"ap-south", "eu-central", "us-east", "us-east-canary"}
	changed := ""
	if len(events) > 0 {
		for _, k := range []string{"drain", "fail"} {
			if p, ok := events[0][k].(string); ok {
				changed = p
			}
		}
	}
	band := func(v float64) simulate.BandJSON {
		return simulate.BandJSON{P5: v * 0.9, P50: v, P95: v * 1.1, Mean: v}
	}
	res := simulate.ResultJSON{Record: "shop.example.com.", Pools: pools, Sites: []string{"isp-asia", "public-ecs"}, BinS: 60, DurationS: 3600, Runs: 10, Seed: 1,
		Phases: []simulate.PhaseJSON{{AtS: 0, Label: "start"}, {AtS: 600, Label: "change"}}}
	for i := 0; i < 60; i++ {
		b := simulate.BinJSON{StartS: float64(i * 60)}
		for _, p := range pools {
			v := 0.25
			if p == changed && i > 10 {
				v = 0
			}
			b.Share = append(b.Share, band(v))
			b.Configured = append(b.Configured, v)
		}
		res.Bins = append(res.Bins, b)
	}
	if changed != "" {
		res.Drains = []simulate.DrainJSON{{Pool: changed, AtS: 600, Label: "drain " + changed, SafeAtS: simulate.BandJSON{P5: 60, P50: 60, P95: 60, Mean: 60}, LastQueryS: band(45)}}
	}
	return api.SimulateResponse{Result: res, Summary: "steer simulate: shop.example.com (fixture)"}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
