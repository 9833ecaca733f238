package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// dashFake is a fake with the dashboard's reads: it records the overview
// queries and hands out events to its subscribers.
type dashFake struct {
	fake
	dmu     sync.Mutex
	queries []OverviewQuery
	subs    map[chan Event]bool
}

func (f *dashFake) Overview(q OverviewQuery) (Overview, error) {
	f.dmu.Lock()
	f.queries = append(f.queries, q)
	f.dmu.Unlock()
	return Overview{Total: 1, Offset: q.Offset, Records: []OverviewRecord{{Name: "www.example.com.", Type: "A", TTL: 30,
		Pools: []OverviewPool{{Name: "eu", State: "up"}}}}, States: map[string]int{"up": 1}}, nil
}

func (f *dashFake) Record(name string) (RecordDetail, error) {
	if name != "www.example.com." {
		return RecordDetail{}, fmt.Errorf("record %s is not a steered record: %w", name, ErrNotFound)
	}
	return RecordDetail{OverviewRecord: OverviewRecord{Name: name}, Config: "- name: www.example.com.\n"}, nil
}

func (f *dashFake) Fleet() (FleetView, error) { return FleetView{}, ErrNotFound }

func (f *dashFake) Subscribe(ctx context.Context) (<-chan Event, func()) {
	ch := make(chan Event, 1)
	f.dmu.Lock()
	if f.subs == nil {
		f.subs = map[chan Event]bool{}
	}
	f.subs[ch] = true
	f.dmu.Unlock()
	return ch, func() {
		f.dmu.Lock()
		delete(f.subs, ch)
		f.dmu.Unlock()
	}
}

func (f *dashFake) subscribers() int {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	return len(f.subs)
}

func (f *dashFake) publish(kind string) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- Event{Kind: kind, At: time.Now()}:
		default:
		}
	}
}

func TestOverviewQuery(t *testing.T) {
	f := &dashFake{}
	h := NewHandler(f, Options{Token: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	if w := do(t, h, "GET", "/v1/overview", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", w.Code)
	}
	w := do(t, h, "GET", "/v1/overview?offset=100&limit=50&q=Shop&state=DOWN", "", auth...)
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	var ov Overview
	if err := json.Unmarshal(w.Body.Bytes(), &ov); err != nil || ov.Total != 1 || len(ov.Records) != 1 || ov.Offset != 100 {
		t.Fatalf("overview body %s (%v)", w.Body, err)
	}
	do(t, h, "GET", "/v1/overview", "", auth...)
	want := []OverviewQuery{{Offset: 100, Limit: 50, Filter: "Shop", State: "down"}, {Limit: DefaultOverviewLimit}}
	if fmt.Sprint(f.queries) != fmt.Sprint(want) {
		t.Fatalf("queries %+v, want %+v", f.queries, want)
	}
	for _, c := range []struct{ query, names string }{
		{"offset=-1", "offset"},
		{"offset=x", "offset"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"state=sideways", "state"},
		{"q=" + strings.Repeat("a", 300), "q"},
	} {
		w := do(t, h, "GET", "/v1/overview?"+c.query, "", auth...)
		if msg := jsonError(t, w, http.StatusBadRequest); !strings.Contains(msg, "bad "+c.names) {
			t.Errorf("%s: %q does not name %s", c.query, msg, c.names)
		}
	}
}

func TestRecordDetail(t *testing.T) {
	h := NewHandler(&dashFake{}, Options{})
	w := do(t, h, "GET", "/v1/records/WWW.example.com", "")
	var d RecordDetail
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &d) != nil || d.Name != "www.example.com." || d.Config == "" {
		t.Fatalf("record: %d %s", w.Code, w.Body)
	}
	jsonError(t, do(t, h, "GET", "/v1/records/nope.example.com.", ""), http.StatusNotFound)
	jsonError(t, do(t, h, "GET", "/v1/records/a..b", ""), http.StatusBadRequest)
}

func TestDashboardNeedsBackend(t *testing.T) {
	h := NewHandler(&fake{}, Options{})
	for _, p := range []string{"/v1/overview", "/v1/records/www.example.com.", "/v1/events"} {
		jsonError(t, do(t, h, "GET", p, ""), http.StatusNotFound)
	}
}

// stream is one open GET /v1/events.
type stream struct {
	resp  *http.Response
	lines chan string
}

func openStream(t *testing.T, url, token string) *stream {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/v1/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{resp: resp, lines: make(chan string, 100)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				s.lines <- sc.Text()
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next returns the next non-empty line starting with prefix, skipping
// others, failing after d.
func (s *stream) next(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("stream ended waiting for %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %q line within %v", prefix, d)
		}
	}
}

func waitSubscribers(t *testing.T, f *dashFake, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); f.subscribers() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d subscribers, want %d", f.subscribers(), n)
		}
	}
}

func TestEventStream(t *testing.T) {
	f := &dashFake{}
	srv := httptest.NewServer(NewHandler(f, Options{Token: "s3cret"}))
	t.Cleanup(srv.Close) // after the streams' bodies are closed
	resp, err := http.Get(srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", resp.StatusCode)
	}
	s := openStream(t, srv.URL, "s3cret")
	if ct := s.resp.Header.Get("Content-Type"); s.resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: %d %q", s.resp.StatusCode, ct)
	}
	s.next(t, ": open", 5*time.Second)
	waitSubscribers(t, f, 1)
	f.publish("health")
	var ev Event
	line := s.next(t, "data: ", 5*time.Second)
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil || ev.Kind != "health" || ev.At.IsZero() {
		t.Fatalf("event %q (%v)", line, err)
	}
	// The client going away ends the stream and its subscription.
	s.resp.Body.Close()
	waitSubscribers(t, f, 0)
}

func TestEventStreamCap(t *testing.T) {
	f := &dashFake{}
	srv := httptest.NewServer(NewHandler(f, Options{}))
	t.Cleanup(srv.Close) // after the streams' bodies are closed
	var open []*stream
	for range DefaultMaxEventStreams {
		s := openStream(t, srv.URL, "")
		s.next(t, ": open", 5*time.Second)
		open = append(open, s)
	}
	resp, err := http.Get(srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body["error"], fmt.Sprint(DefaultMaxEventStreams)) {
		t.Fatalf("stream %d over the cap: %d %v", DefaultMaxEventStreams+1, resp.StatusCode, body)
	}
	// One closed makes room for one more.
	open[0].resp.Body.Close()
	waitSubscribers(t, f, DefaultMaxEventStreams-1)
	s := openStream(t, srv.URL, "")
	s.next(t, ": open", 5*time.Second)
}

// TestEventStreamOutlivesTimeouts: the server's read and write timeouts
// do not end a stream, which keeps pinging and delivering events.
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	old := eventPingEvery
	eventPingEvery = 50 * time.Millisecond
	defer func() { eventPingEvery = old }()
	f := &dashFake{}
	srv := httptest.NewUnstartedServer(NewHandler(f, Options{}))
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Config.WriteTimeout = 200 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close) // after the stream's body is closed
	s := openStream(t, srv.URL, "")
	s.next(t, ": open", 5*time.Second)
	waitSubscribers(t, f, 1)
	time.Sleep(800 * time.Millisecond) // four times both timeouts
	s.next(t, ": ping", 5*time.Second)
	f.publish("reload")
	if l := s.next(t, "data: ", 5*time.Second); !strings.Contains(l, `"reload"`) {
		t.Fatalf("event %q", l)
	}
}

// TestServeStopEndsStreams: Serve's graceful stop ends open streams at
// once instead of waiting for them (or for its context).
func TestServeStopEndsStreams(t *testing.T) {
	f := &dashFake{}
	addr, stop, err := Serve(context.Background(), "127.0.0.1:0", NewHandler(f, Options{}), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := openStream(t, "http://"+addr, "")
	s.next(t, ": open", 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("stop with an open stream: %v (held up until its context ended)", err)
	}
	select {
	case _, ok := <-s.lines:
		for ok {
			_, ok = <-s.lines
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open after stop")
	}
	waitSubscribers(t, f, 0)
}
