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
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
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
	mux := http.NewServeMux()
	if dir := os.Getenv("STEER_UI_ASSETS"); dir != "" {
		// Serve the files being edited rather than the embedded copy.
		mux.Handle("/ui/", http.StripPrefix("/ui", http.FileServerFS(os.DirFS(dir))))
	} else {
		mux.Handle("/ui/", ui.Handler())
	}
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
		if os.Getenv("STEER_UI_NOFLEET") != "" {
			writeJSON(w, 404, map[string]string{"error": "not in a fleet"})
			return
		}
		writeJSON(w, 200, toolsFleet(time.Now()))
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if os.Getenv("STEER_UI_EVENTS") == "" {
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
	if up := os.Getenv("STEER_UI_UPSTREAM"); up != "" {
		u, err := url.Parse(up)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(u)
		if tok := os.Getenv("STEER_UI_TOKEN"); tok != "" {
			// The upstream's API token (its api.token_file's content).
			director := proxy.Director
			proxy.Director = func(r *http.Request) {
				director(r)
				r.Header.Set("Authorization", "Bearer "+tok)
			}
		}
		csrf := func(h http.Handler) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet && r.Header.Get("X-CSRF-Token") != "fixture-csrf" {
					writeJSON(w, 403, map[string]string{"error": "missing or wrong CSRF token"})
					return
				}
				h.ServeHTTP(w, r)
			}
		}
		mux.Handle("GET /v1/explain", proxy)
		mux.Handle("POST /v1/simulate", csrf(proxy))
		mux.Handle("PUT /v1/records/{name}/pools/{pool}/state", csrf(proxy))
	}
	t.Logf("fixture at http://%s/ui/", addr)
	t.Fatal(http.ListenAndServe(addr, mux))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
