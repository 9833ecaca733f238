package ui_test

// A fixture API for the overview and record pages: GET /v1/overview
// (paged, filtered by q and state, as internal/api serves it),
// GET /v1/records/{name}, GET /v1/events and GET /ui/session, answered
// from generated records (a few Larkbook-like ones, then synthetic ones
// up to N). Run it by hand with
//
//	STEER_UI_OVERVIEW_FIXTURE=127.0.0.1:28081 go test ./internal/ui/ -run TestOverviewFixtureServer -timeout 0
//
// and open http://127.0.0.1:28081/ui/ (STEER_UI_RECORDS=n: how many
// records, 10000 by default; STEER_UI_ASSETS=internal/ui/assets: serve
// the files as edited; STEER_UI_NOEVENTS=1: answer /v1/events with 204,
// for headless --virtual-time-budget runs, which an open stream never
// lets end). Every 10 s it flips a pool of shop.example.com.
// between up and down and sends an event, so live refresh can be watched.
// overview_page_test.go loads the pages from it in headless Chromium and
// checks what they render and how they behave.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/api"
	"github.com/steer-dns/steer/internal/ui"
)

// ovFixture is the fixture API's state.
type ovFixture struct {
	mu      sync.Mutex
	records []api.OverviewRecord
	changed chan struct{} // closed and replaced on every change
	events  bool          // hold /v1/events open (false: 204, which stops an EventSource)
}

func ovBool(b bool) *bool { return &b }

func newOvFixture(n int, now time.Time) *ovFixture {
	at := func(d time.Duration) time.Time { return now.Add(-d).UTC().Truncate(time.Second) }
	loc := func(lat, lon float64) *api.LatLon { return &api.LatLon{Lat: lat, Lon: lon} }
	recs := []api.OverviewRecord{
		{Name: "shop.example.com.", Type: "A", TTL: 30, Answers5m: 5000, Answers1h: 61000, Pools: []api.OverviewPool{
			{Name: "mumbai", State: "down", Reason: "https 203.0.113.10:443: connect: connection refused", Since: at(3 * time.Minute),
				Answers5m: 0, Answers1h: 9000, Share5m: 0, Share1h: 0.1475, LastAnswered: at(3 * time.Minute),
				NoTraffic: "down: https 203.0.113.10:443: connect: connection refused", Location: loc(19.08, 72.88), TargetsUp: 0, Targets: 2},
			{Name: "frankfurt", State: "up", Reason: "2 of 2 targets up", Since: at(26 * time.Hour),
				Answers5m: 3105, Answers1h: 40000, Share5m: 0.621, Share1h: 0.6557, LastAnswered: at(time.Second), Location: loc(50.11, 8.68), TargetsUp: 2, Targets: 2},
			{Name: "virginia", State: "drain", Reason: "override", Override: true, Since: at(40 * time.Second),
				Answers5m: 1895, Answers1h: 12000, Share5m: 0.379, Share1h: 0.1967, DrainSafe: ovBool(false), LastAnswered: at(12 * time.Second),
				Location: loc(38.95, -77.45), TargetsUp: 2, Targets: 2},
		}},
		{Name: "api.example.com.", Type: "AAAA", TTL: 60, Policy: "nearest", Answers5m: 800, Answers1h: 9000, Pools: []api.OverviewPool{
			{Name: "frankfurt", State: "up", Since: at(26 * time.Hour), Answers5m: 800, Answers1h: 9000, Share5m: 1, Share1h: 1, LastAnswered: at(time.Second), Location: loc(50.11, 8.68), TargetsUp: 1, Targets: 1},
			{Name: "sydney", State: "drain", Reason: "override", Override: true, Since: at(20 * time.Minute), DrainSafe: ovBool(true), LastAnswered: at(19 * time.Minute),
				NoTraffic: "drained", Location: loc(-33.87, 151.21), TargetsUp: 1, Targets: 1},
			{Name: "saopaulo", State: "disabled", Reason: "disabled in the configuration", Since: at(48 * time.Hour), NoTraffic: "disabled", Location: loc(-23.55, -46.63)},
		}},
	}
	sites := []struct {
		name     string
		lat, lon float64
	}{{"tokyo", 35.68, 139.69}, {"london", 51.51, -0.13}, {"oregon", 45.6, -121.2}, {"singapore", 1.35, 103.82}, {"johannesburg", -26.2, 28.05}}
	for i := len(recs); i < n; i++ {
		a, b := sites[i%len(sites)], sites[(i/len(sites)+1+i)%len(sites)]
		if a == b {
			b = sites[(i+1)%len(sites)]
		}
		total := uint64(i*37%1000 + 1)
		sa := float64(i*13%100) / 100
		p1 := api.OverviewPool{Name: a.name, State: "up", Since: at(time.Duration(i%600) * time.Minute), Answers5m: uint64(float64(total) * sa),
			Share5m: sa, Share1h: sa, LastAnswered: at(time.Second), Location: loc(a.lat, a.lon), TargetsUp: 1, Targets: 1}
		p2 := api.OverviewPool{Name: b.name, State: "up", Since: at(time.Duration(i%900) * time.Minute), Answers5m: total - p1.Answers5m,
			Share5m: 1 - sa, Share1h: 1 - sa, LastAnswered: at(time.Second), Location: loc(b.lat, b.lon), TargetsUp: 1, Targets: 1}
		if i%97 == 0 {
			p2.State, p2.Reason, p2.Share5m, p2.Answers5m, p2.NoTraffic = "down", "http: 503", 0, 0, "down: http: 503"
			p1.Share5m, p1.Answers5m = 1, total
		}
		recs = append(recs, api.OverviewRecord{Name: fmt.Sprintf("r%05d.example.net.", i), Type: "A", TTL: 30,
			Answers5m: total, Answers1h: total * 12, Pools: []api.OverviewPool{p1, p2}})
	}
	return &ovFixture{records: recs, changed: make(chan struct{})}
}

func (f *ovFixture) overview(q api.OverviewQuery) api.Overview {
	f.mu.Lock()
	defer f.mu.Unlock()
	ov := api.Overview{Generated: time.Now().UTC(), Covered5m: "5m", Covered1h: "1h", States: map[string]int{}}
	var match []api.OverviewRecord
	for _, r := range f.records {
		has := q.State == ""
		for _, p := range r.Pools {
			ov.States[p.State]++
			has = has || p.State == q.State
		}
		if has && (q.Filter == "" || strings.Contains(strings.ToLower(r.Name), strings.ToLower(q.Filter))) {
			match = append(match, r)
		}
	}
	ov.Total, ov.Offset = len(match), q.Offset
	if q.Offset < len(match) {
		match = match[q.Offset:min(len(match), q.Offset+q.Limit)]
	} else {
		match = nil
	}
	ov.Records = append([]api.OverviewRecord{}, match...)
	worst := map[string]int{"up": 0, "disabled": 1, "drain": 2, "down": 3}
	points := map[api.LatLon]*api.MapPoint{}
	for _, r := range ov.Records {
		for _, p := range r.Pools {
			if p.Location == nil {
				continue
			}
			mp := points[*p.Location]
			if mp == nil {
				mp = &api.MapPoint{Kind: "pool", Label: p.Name, LatLon: *p.Location, State: p.State}
				points[*p.Location] = mp
			}
			if worst[p.State] > worst[mp.State] {
				mp.State = p.State
			}
			mp.Pools = append(mp.Pools, r.Name+"/"+p.Name)
		}
	}
	for _, mp := range points {
		ov.Map = append(ov.Map, *mp)
	}
	sort.Slice(ov.Map, func(i, j int) bool { return ov.Map[i].Label < ov.Map[j].Label })
	ov.Map = append(ov.Map, api.MapPoint{Kind: "node", Label: "fra-1", LatLon: api.LatLon{Lat: 50.1, Lon: 8.7}, State: "up"},
		api.MapPoint{Kind: "node", Label: "iad-1", LatLon: api.LatLon{Lat: 39, Lon: -77.5}, State: "stale"})
	return ov
}

func (f *ovFixture) record(name string) (api.RecordDetail, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.records {
		if r.Name != name {
			continue
		}
		d := api.RecordDetail{OverviewRecord: r, ConfigFile: "examples/larkbook/steer.yaml", ConfigLine: 42,
			Config: "records:\n  " + name + ":\n    type: " + r.Type + "\n    ttl: 30\n    rules:\n      - match: {country: [IN, LK]}\n        weighted: {mumbai: 3, frankfurt: 1}\n      - match: {continent: [EU]}\n        pool: frankfurt\n      - default:\n          nearest: [frankfurt, virginia, mumbai]\n",
			Rules: []api.RuleDetail{
				{Index: 1, Match: "country IN LK", Action: "weighted mumbai:3 frankfurt:1", Decisions5m: 1200, Decisions1h: 15000, Share5m: 0.24, Share1h: 0.246},
				{Index: 2, Depth: 1, Match: "pool mumbai down", Action: "failover frankfurt", Decisions5m: 1200, Decisions1h: 2000, Share5m: 0.24, Share1h: 0.033},
				{Index: 3, Match: "continent EU", Action: "pool frankfurt", Decisions5m: 2000, Decisions1h: 26000, Share5m: 0.4, Share1h: 0.426},
				{Index: 4, Match: "default", Action: "nearest frankfurt virginia mumbai", Decisions5m: 1800, Decisions1h: 20000, Share5m: 0.36, Share1h: 0.328},
			},
			Scopes: []api.ScopeHistogram{
				{Family: "ipv4", Lengths: []int{0, 8, 16, 20, 24}, Counts: []uint64{100, 900, 5200, 2100, 30500}, Widened: 6100, WidenedCounts: []uint64{0, 800, 5200, 100, 0}},
				{Family: "ipv6", Lengths: []int{0, 32, 48, 56}, Counts: []uint64{20, 800, 3900, 11000}, Widened: 700},
			},
			Widened: []string{"49.36.0.0/16 from /24: pool mumbai down", "2405:200::/32 from /48: pool mumbai down"},
			Latency: []api.LatencyExcerpt{
				{Network: "49.36.0.0/16", Sites: []string{"mumbai 18ms", "frankfurt 121ms", "virginia 212ms"}, Age: "4m"},
				{Network: "81.2.64.0/18", Sites: []string{"frankfurt 14ms", "virginia 88ms"}, Age: "9m"},
			},
		}
		return d, true
	}
	return api.RecordDetail{}, false
}

// flip toggles shop.example.com.'s first pool between up and down.
func (f *ovFixture) flip() {
	f.mu.Lock()
	p := &f.records[0].Pools[0]
	if p.State == "down" {
		p.State, p.Reason, p.NoTraffic = "up", "2 of 2 targets up", ""
	} else {
		p.State, p.Reason, p.NoTraffic = "down", "https 203.0.113.10:443: connect: connection refused", "down: https 203.0.113.10:443: connect: connection refused"
	}
	p.Since = time.Now().UTC().Truncate(time.Second)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *ovFixture) handler(assets http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", assets)
	mux.HandleFunc("GET /ui/session", func(w http.ResponseWriter, r *http.Request) {
		ovJSON(w, 200, map[string]string{"csrf": "fixture-csrf"})
	})
	mux.HandleFunc("GET /v1/overview", func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		q := api.OverviewQuery{Filter: v.Get("q"), State: v.Get("state")}
		var err error
		if s := v.Get("offset"); s != "" {
			if q.Offset, err = strconv.Atoi(s); err != nil || q.Offset < 0 {
				ovJSON(w, 400, map[string]string{"error": "bad offset " + strconv.Quote(s)})
				return
			}
		}
		if q.Limit, _ = strconv.Atoi(v.Get("limit")); q.Limit <= 0 || q.Limit > api.MaxOverviewLimit {
			q.Limit = api.DefaultOverviewLimit
		}
		ovJSON(w, 200, f.overview(q))
	})
	mux.HandleFunc("GET /v1/records/{name}", func(w http.ResponseWriter, r *http.Request) {
		d, ok := f.record(r.PathValue("name"))
		if !ok {
			ovJSON(w, 404, map[string]string{"error": "no steered record " + strconv.Quote(r.PathValue("name"))})
			return
		}
		ovJSON(w, 200, d)
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if !f.events {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, ": open\n\n")
		w.(http.Flusher).Flush()
		for {
			f.mu.Lock()
			ch := f.changed
			f.mu.Unlock()
			select {
			case <-r.Context().Done():
				return
			case <-ch:
				b, _ := json.Marshal(api.Event{Kind: "health", At: time.Now().UTC()})
				fmt.Fprintf(w, "data: %s\n\n", b)
				w.(http.Flusher).Flush()
			}
		}
	})
	return mux
}

func ovJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func ovAssets() http.Handler {
	if dir := os.Getenv("STEER_UI_ASSETS"); dir != "" {
		return http.StripPrefix("/ui", http.FileServerFS(os.DirFS(dir)))
	}
	return ui.Handler()
}

func TestOverviewFixtureServer(t *testing.T) {
	addr := os.Getenv("STEER_UI_OVERVIEW_FIXTURE")
	if addr == "" {
		t.Skip("set STEER_UI_OVERVIEW_FIXTURE=host:port to serve the overview fixture")
	}
	n := 10000
	if s := os.Getenv("STEER_UI_RECORDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	f := newOvFixture(n, time.Now())
	f.events = os.Getenv("STEER_UI_NOEVENTS") == ""
	go func() {
		for range time.Tick(10 * time.Second) {
			f.flip()
		}
	}()
	t.Logf("serving the overview fixture (%d records) at http://%s/ui/", n, addr)
	t.Fatal(http.ListenAndServe(addr, f.handler(ovAssets())))
}

// TestAssetWeight keeps the dashboard's assets well under the issue's
// 500 KB page weight.
func TestAssetWeight(t *testing.T) {
	total := 0
	entries, err := os.ReadDir("assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += int(fi.Size())
	}
	if total > 300<<10 {
		t.Errorf("assets weigh %d bytes, over 300 KB (the page budget is 500 KB)", total)
	}
	t.Logf("assets: %d bytes", total)
}
