package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/explain"
	"github.com/steer-dns/steer/internal/latency"
	"github.com/steer-dns/steer/internal/version"
)

// fake is a Backend that records its calls.
type fake struct {
	mu        sync.Mutex
	ready     bool
	why       string
	explains  []explain.Request
	explainFn func(explain.Request) (*explain.Report, error)
	targets   []targetCall
	pools     []poolCall
	reloads   int
	reloadErr error
	stateErr  error
	pushes    [][]latency.Measurement // POST /v1/latency batches applied
}

type targetCall struct {
	addr    netip.Addr
	state   string
	expires time.Time
}

type poolCall struct {
	record, pool, state string
	expires             time.Time
}

func (f *fake) Ready() (bool, string) { return f.ready, f.why }

func (f *fake) Status() Status {
	return Status{
		Version: "test",
		Loaded:  time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		Records: []RecordStatus{{Name: "www.example.com.", Type: "A", TTL: 30, Pools: []PoolStatus{
			{Name: "eu", State: "up", Targets: []TargetStatus{{Address: "198.51.100.20", State: "up"}}},
		}}},
		Zones: []ZoneStatus{{Origin: "example.com.", Serial: 7, Records: 12, File: "example.com.zone"}},
	}
}

func (f *fake) Explain(req explain.Request) (*explain.Report, error) {
	f.mu.Lock()
	f.explains = append(f.explains, req)
	f.mu.Unlock()
	if f.explainFn != nil {
		return f.explainFn(req)
	}
	return &explain.Report{Query: dns.Fqdn(req.Name) + " " + dns.TypeToString[req.Qtype], Rcode: "NOERROR",
		Answer: []string{"www.example.com.\t30\tIN\tA\t198.51.100.20"}}, nil
}

func (f *fake) SetTargetState(addr netip.Addr, state string, expires time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stateErr != nil {
		return f.stateErr
	}
	f.targets = append(f.targets, targetCall{addr, state, expires})
	return nil
}

func (f *fake) SetPoolState(record, pool, state string, expires time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if record != "www.example.com." {
		return fmt.Errorf("record %q: %w", record, ErrNotFound)
	}
	if pool != "eu" {
		return fmt.Errorf("record %q has no pool %q: %w", record, pool, ErrNotFound)
	}
	if f.stateErr != nil {
		return f.stateErr
	}
	f.pools = append(f.pools, poolCall{record, pool, state, expires})
	return nil
}

func (f *fake) Reload(context.Context) (ReloadResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	res := ReloadResult{Seq: uint64(f.reloads), Trigger: "api", Applied: f.reloadErr == nil, Took: "1ms"}
	if f.reloadErr != nil {
		res.Problems = strings.Split(f.reloadErr.Error(), "\n")
	}
	return res, f.reloadErr
}

func do(t *testing.T, h http.Handler, method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// jsonError checks a JSON error response and returns its message.
func jsonError(t *testing.T, w *httptest.ResponseRecorder, code int) string {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d, want %d; body %s", w.Code, code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
		t.Fatalf("not a JSON error body: %q (%v)", w.Body, err)
	}
	return e.Error
}

func TestHealthzReadyz(t *testing.T) {
	f := &fake{ready: true}
	h := NewHandler(f, Options{Token: "secret"}) // probes need no token
	if w := do(t, h, "GET", "/healthz", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "ok" {
		t.Fatalf("healthz: %d %q", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/readyz", ""); w.Code != 200 || strings.TrimSpace(w.Body.String()) != "ready" {
		t.Fatalf("readyz: %d %q", w.Code, w.Body)
	}
	f.ready, f.why = false, "geo database country not loaded"
	w := do(t, h, "GET", "/readyz", "")
	if w.Code != 503 || !strings.Contains(w.Body.String(), "geo database country not loaded") {
		t.Fatalf("readyz not ready: %d %q", w.Code, w.Body)
	}
}

func TestMetrics(t *testing.T) {
	m := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "steer_up 1\n") })
	h := NewHandler(&fake{}, Options{Token: "secret", Metrics: m})
	if w := do(t, h, "GET", "/metrics", ""); w.Code != 200 || w.Body.String() != "steer_up 1\n" {
		t.Fatalf("metrics: %d %q", w.Code, w.Body)
	}
	h = NewHandler(&fake{}, Options{Metrics: nil})
	jsonError(t, do(t, h, "GET", "/metrics", ""), 404)
}

func TestAuth(t *testing.T) {
	h := NewHandler(&fake{}, Options{Token: "s3cret"})
	for _, c := range []struct{ name, auth, wantErr string }{
		{"none", "", ""},
		{"wrong", "Bearer nope", "invalid_token"},
		{"scheme", "Basic czNjcmV0", ""},
		{"prefix", "Bearer s3cre", "invalid_token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hdr []string
			if c.auth != "" {
				hdr = []string{"Authorization", c.auth}
			}
			for _, p := range []struct{ m, u string }{{"GET", "/v1/status"}, {"POST", "/v1/reload"}, {"GET", "/v1/nothing"}} {
				w := do(t, h, p.m, p.u, "", hdr...)
				jsonError(t, w, 401)
				wa := w.Header().Get("WWW-Authenticate")
				if !strings.HasPrefix(wa, "Bearer") || !strings.Contains(wa, c.wantErr) {
					t.Fatalf("%s %s: WWW-Authenticate %q", p.m, p.u, wa)
				}
			}
		})
	}
	if w := do(t, h, "GET", "/v1/status", "", "Authorization", "Bearer s3cret"); w.Code != 200 {
		t.Fatalf("with token: %d %s", w.Code, w.Body)
	}
	if w := do(t, h, "GET", "/v1/status", "", "Authorization", "bearer s3cret"); w.Code != 200 {
		t.Fatalf("scheme is case-insensitive: %d %s", w.Code, w.Body)
	}
	// No token configured: open.
	if w := do(t, NewHandler(&fake{}, Options{}), "GET", "/v1/status", ""); w.Code != 200 {
		t.Fatalf("without auth: %d %s", w.Code, w.Body)
	}
}

func TestStatus(t *testing.T) {
	f := &fake{}
	w := do(t, NewHandler(f, Options{}), "GET", "/v1/status", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var got Status
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := f.Status()
	if got.Version != want.Version || !got.Loaded.Equal(want.Loaded) || len(got.Records) != 1 ||
		got.Records[0].Pools[0].Targets[0].Address != "198.51.100.20" || got.Zones[0].Serial != 7 {
		t.Fatalf("status body %+v", got)
	}
	if bi := version.Get(); got.Build == nil || *got.Build != bi {
		t.Fatalf("status build %+v, want %+v", got.Build, bi)
	}
	var raw map[string]map[string]any
	json.Unmarshal(w.Body.Bytes(), &raw)
	for _, k := range []string{"version", "commit", "date", "modified", "go_version"} {
		if _, ok := raw["build"][k]; !ok {
			t.Errorf("status build has no %q: %v", k, raw["build"])
		}
	}
}

func TestExplain(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{})
	w := do(t, h, "GET", "/v1/explain?name=www.example.com", "")
	if w.Code != 200 {
		t.Fatalf("explain: %d %s", w.Code, w.Body)
	}
	var rep explain.Report
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil || rep.Rcode != "NOERROR" || len(rep.Answer) != 1 {
		t.Fatalf("report %+v (%v)", rep, err)
	}
	got := f.explains[0]
	if got.Name != "www.example.com" || got.Qtype != dns.TypeA || got.ECS.IsValid() || got.From != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("defaults: %+v", got)
	}

	for _, c := range []struct {
		q    string
		want explain.Request
	}{
		{"name=www.example.com.&type=aaaa&ecs=49.36.0.0/24&from=192.0.2.53",
			explain.Request{Name: "www.example.com.", Qtype: dns.TypeAAAA, ECS: netip.MustParsePrefix("49.36.0.0/24"), From: netip.MustParseAddr("192.0.2.53")}},
		{"name=x.example&ecs=49.36.1.2&type=TYPE65",
			explain.Request{Name: "x.example", Qtype: 65, ECS: netip.MustParsePrefix("49.36.1.2/32"), From: netip.MustParseAddr("127.0.0.1")}},
		{"name=x.example&ecs=2001:db8::/56&from=2001:db8::53&type=TXT",
			explain.Request{Name: "x.example", Qtype: dns.TypeTXT, ECS: netip.MustParsePrefix("2001:db8::/56"), From: netip.MustParseAddr("2001:db8::53")}},
		{"name=x.example&dnssec=false",
			explain.Request{Name: "x.example", Qtype: dns.TypeA, From: netip.MustParseAddr("127.0.0.1"), NoDNSSEC: true}},
		{"name=x.example&dnssec=1",
			explain.Request{Name: "x.example", Qtype: dns.TypeA, From: netip.MustParseAddr("127.0.0.1")}},
	} {
		f.explains = nil
		if w := do(t, h, "GET", "/v1/explain?"+c.q, ""); w.Code != 200 {
			t.Fatalf("%s: %d %s", c.q, w.Code, w.Body)
		}
		if f.explains[0] != c.want {
			t.Fatalf("%s: got %+v, want %+v", c.q, f.explains[0], c.want)
		}
	}

	f.explains = nil
	for _, c := range []struct{ q, msg string }{
		{"", "missing name"},
		{"type=A", "missing name"},
		{"name=www.example.com&type=BOGUS", "unknown type"},
		{"name=www.example.com&type=TYPE0", "unknown type"},
		{"name=www.example.com&ecs=49.36.0.0/33", "bad ecs"},
		{"name=www.example.com&ecs=nope", "bad ecs"},
		{"name=www.example.com&from=300.1.1.1", "bad from"},
		{"name=www.example.com&dnssec=maybe", "bad dnssec"},
		{"name=www.example.com&from=192.0.2.0/24", "bad from"},
		{"name=" + strings.Repeat("a", 64) + ".example", "bad name"},
	} {
		msg := jsonError(t, do(t, h, "GET", "/v1/explain?"+c.q, ""), 400)
		if !strings.Contains(msg, c.msg) {
			t.Fatalf("%q: error %q, want %q", c.q, msg, c.msg)
		}
	}
	if len(f.explains) != 0 {
		t.Fatalf("backend called for bad parameters: %+v", f.explains)
	}

	f.explainFn = func(explain.Request) (*explain.Report, error) { return nil, errors.New("the server dropped the query") }
	if msg := jsonError(t, do(t, h, "GET", "/v1/explain?name=a.example", ""), 500); !strings.Contains(msg, "dropped") {
		t.Fatalf("backend error: %q", msg)
	}
}

func TestTargetState(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{})
	before := time.Now()
	w := do(t, h, "PUT", "/v1/targets/198.51.100.20/state", `{"state":"drain","expires":"30m"}`)
	after := time.Now()
	if w.Code != 204 || w.Body.Len() != 0 {
		t.Fatalf("set: %d %q", w.Code, w.Body)
	}
	c := f.targets[0]
	if c.addr != netip.MustParseAddr("198.51.100.20") || c.state != "drain" {
		t.Fatalf("call %+v", c)
	}
	if c.expires.Before(before.Add(30*time.Minute)) || c.expires.After(after.Add(30*time.Minute)) {
		t.Fatalf("expires %v, want now+30m (%v)", c.expires, before.Add(30*time.Minute))
	}

	abs := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	w = do(t, h, "PUT", "/v1/targets/2001:db8::1/state", fmt.Sprintf(`{"state":"down","expires":%q}`, abs.Format(time.RFC3339)))
	if w.Code != 204 {
		t.Fatalf("rfc3339: %d %s", w.Code, w.Body)
	}
	if c := f.targets[1]; c.addr != netip.MustParseAddr("2001:db8::1") || c.state != "down" || !c.expires.Equal(abs) {
		t.Fatalf("call %+v, want expires %v", c, abs)
	}

	if w := do(t, h, "PUT", "/v1/targets/198.51.100.20/state", `{"state":"auto"}`); w.Code != 204 || !f.targets[2].expires.IsZero() {
		t.Fatalf("no expiry: %d %+v", w.Code, f.targets[2])
	}

	n := len(f.targets)
	for _, c := range []struct{ path, body, msg string }{
		{"/v1/targets/not-an-ip/state", `{"state":"drain"}`, "bad address"},
		{"/v1/targets/fe80::1%25eth0/state", `{"state":"drain"}`, "bad address"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain"`, "bad JSON"},
		{"/v1/targets/198.51.100.20/state", ``, "empty body"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain"} {}`, "trailing"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain","until":"1h"}`, "unknown field"},
		{"/v1/targets/198.51.100.20/state", `{"state":"sleepy"}`, "bad state"},
		{"/v1/targets/198.51.100.20/state", `{}`, "bad state"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain","expires":"soon"}`, "bad expires"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain","expires":"-5m"}`, "positive"},
		{"/v1/targets/198.51.100.20/state", `{"state":"drain","expires":"2001-01-01T00:00:00Z"}`, "past"},
	} {
		msg := jsonError(t, do(t, h, "PUT", c.path, c.body), 400)
		if !strings.Contains(msg, c.msg) {
			t.Fatalf("%s %s: error %q, want %q", c.path, c.body, msg, c.msg)
		}
	}
	if len(f.targets) != n {
		t.Fatalf("backend called for bad requests: %+v", f.targets[n:])
	}

	f.stateErr = errors.New("no health-check target 198.51.100.99")
	if msg := jsonError(t, do(t, h, "PUT", "/v1/targets/198.51.100.99/state", `{"state":"up"}`), 400); !strings.Contains(msg, "no health-check target") {
		t.Fatalf("backend error: %q", msg)
	}

	// Wrong method: 405 from the mux, as JSON.
	w = do(t, h, "GET", "/v1/targets/198.51.100.20/state", "")
	jsonError(t, w, 405)
	if !strings.Contains(w.Header().Get("Allow"), "PUT") {
		t.Fatalf("Allow %q", w.Header().Get("Allow"))
	}
}

func TestPoolState(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{})
	before := time.Now()
	if w := do(t, h, "PUT", "/v1/records/www.example.com./pools/eu/state", `{"state":"drain","expires":"30m"}`); w.Code != 204 {
		t.Fatalf("set: %d %s", w.Code, w.Body)
	}
	c := f.pools[0]
	if c.record != "www.example.com." || c.pool != "eu" || c.state != "drain" {
		t.Fatalf("call %+v", c)
	}
	if d := c.expires.Sub(before); d < 30*time.Minute || d > 30*time.Minute+5*time.Second {
		t.Fatalf("expires %v is not ~now+30m", c.expires)
	}
	jsonError(t, do(t, h, "PUT", "/v1/records/nope.example./pools/eu/state", `{"state":"drain"}`), 404)
	jsonError(t, do(t, h, "PUT", "/v1/records/www.example.com./pools/us/state", `{"state":"drain"}`), 404)
	jsonError(t, do(t, h, "PUT", "/v1/records/www.example.com./pools/eu/state", `{"state":"bogus"}`), 400)
	f.stateErr = errors.New("pool eu is the only pool")
	jsonError(t, do(t, h, "PUT", "/v1/records/www.example.com./pools/eu/state", `{"state":"down"}`), 400)
	if len(f.pools) != 1 {
		t.Fatalf("calls %+v", f.pools)
	}
}

func TestReload(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{})
	w := do(t, h, "POST", "/v1/reload", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("reload: %d %s", w.Code, w.Body)
	}
	var ok ReloadResult
	if err := json.Unmarshal(w.Body.Bytes(), &ok); err != nil || !ok.Applied || ok.Seq != 1 {
		t.Fatalf("body %q", w.Body)
	}
	f.reloadErr = errors.New("steer.yaml:12: unknown pool \"us\"\nsteer.yaml:20: bad ttl")
	msg := jsonError(t, do(t, h, "POST", "/v1/reload", ""), 422)
	if msg != f.reloadErr.Error() {
		t.Fatalf("422 error %q, want every problem %q", msg, f.reloadErr)
	}
	if f.reloads != 2 {
		t.Fatalf("reloads %d", f.reloads)
	}
	var rej ReloadResult
	json.Unmarshal(do(t, h, "POST", "/v1/reload", "").Body.Bytes(), &rej)
	if rej.Applied || len(rej.Problems) != 2 {
		t.Fatalf("rejected result %+v, want both problems listed", rej)
	}
	jsonError(t, do(t, h, "GET", "/v1/reload", ""), 405)
}

// A node with no token on a non-loopback address refuses every change
// with 403 and the reason, still answers reads, and SetAuth lifts it.
func TestRefuseChanges(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{RefuseChanges: "no token configured"})
	if msg := jsonError(t, do(t, h, "POST", "/v1/reload", ""), 403); msg != "no token configured" {
		t.Fatalf("403 reason %q", msg)
	}
	jsonError(t, do(t, h, "PUT", "/v1/targets/192.0.2.1/state", `{"state":"down"}`), 403)
	if w := do(t, h, "GET", "/v1/status", ""); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	if f.reloads != 0 || len(f.targets) != 0 {
		t.Fatalf("a refused change reached the backend: %d reloads, %v", f.reloads, f.targets)
	}
	h.SetAuth("tok", "")
	if w := do(t, h, "POST", "/v1/reload", "", "Authorization", "Bearer tok"); w.Code != 200 {
		t.Fatalf("after SetAuth: %d %s", w.Code, w.Body)
	}
	jsonError(t, do(t, h, "POST", "/v1/reload", ""), 401)
}

func TestBodyLimit(t *testing.T) {
	f := &fake{}
	h := NewHandler(f, Options{})
	big := `{"state":"drain","expires":"` + strings.Repeat("9", MaxBodyBytes) + `"}`
	msg := jsonError(t, do(t, h, "PUT", "/v1/targets/198.51.100.20/state", big), 413)
	if !strings.Contains(msg, "larger than") {
		t.Fatalf("error %q", msg)
	}
	// A valid object followed by padding past the limit.
	pad := `{"state":"drain"}` + strings.Repeat(" ", MaxBodyBytes)
	jsonError(t, do(t, h, "PUT", "/v1/targets/198.51.100.20/state", pad), 413)
	if len(f.targets) != 0 {
		t.Fatalf("backend called: %+v", f.targets)
	}
}

func TestNotFound(t *testing.T) {
	h := NewHandler(&fake{}, Options{})
	jsonError(t, do(t, h, "GET", "/v1/nothing", ""), 404)
	jsonError(t, do(t, h, "GET", "/", ""), 404)
}

func TestServe(t *testing.T) {
	f := &fake{ready: true}
	h := NewHandler(f, Options{Token: "tok"})
	addr, stop, err := Serve(context.Background(), "127.0.0.1:0", h, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background())
	base := "http://" + addr
	cl := &http.Client{Timeout: 5 * time.Second}

	resp, err := cl.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}

	req, _ := http.NewRequest("PUT", base+"/v1/records/www.example.com./pools/eu/state", strings.NewReader(`{"state":"drain","expires":"30m"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.mu.Lock()
	calls := len(f.pools)
	f.mu.Unlock()
	if resp.StatusCode != 204 || calls != 1 {
		t.Fatalf("pool state %d, %d calls", resp.StatusCode, calls)
	}

	resp, err = cl.Get(base + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("status without token %d", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := cl.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answering after stop")
	}
}

func TestServeBadListen(t *testing.T) {
	if _, _, err := Serve(context.Background(), "127.0.0.1:notaport", http.NotFoundHandler(), nil, 0); err == nil {
		t.Fatal("want an error")
	}
}
