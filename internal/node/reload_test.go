package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
)

const oneZone = `listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
zones:
  - { origin: example.com, file: example.com.zone }
`

// SIGHUP-style requests in a burst while API reloads run in a loop: no two
// reloads overlap (observed from inside the reload), every request gets a
// result from a reload that started after it, and the last zone written
// is served right after the burst.
func TestReloadsSerialisedAndCoalesced(t *testing.T) {
	// The hook runs at the end of every reload: were two reloads ever
	// run at once, two hooks would be inside it together.
	var overlap, ran, active atomic.Int32
	hook := func(Result) {
		ran.Add(1)
		if active.Add(1) != 1 {
			overlap.Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		active.Add(-1)
	}
	n := startNode(t, map[string]string{
		"steer.yaml": oneZone, "token": "tok", "example.com.zone": zone("example.com", 1, "v1"),
	}, Options{AfterReload: hook})
	stop := make(chan struct{})
	var apiCalls, apiFailed atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			before := n.seq.Load()
			res, err := n.Reload(context.Background())
			apiCalls.Add(1)
			if err != nil || res.Seq <= before {
				apiFailed.Add(1)
				t.Errorf("API reload: %+v %v (seq before %d)", res, err, before)
			}
		}
	}()
	var waiters []<-chan Result
	var seqs []uint64
	for i := 2; i <= 51; i++ {
		writeFile(t, n.dir, "example.com.zone", zone("example.com", i, "v"+strconv.Itoa(i)))
		seqs = append(seqs, n.seq.Load())
		waiters = append(waiters, n.request(kindConfig, "SIGHUP"))
	}
	burstEnd := time.Now()
	dnstest.WaitFor(t, time.Second, "the last zone written is served within 1 s of the burst", func() bool { return n.txt("gen.example.com") == "v51" })
	t.Logf("last zone served %v after the burst", time.Since(burstEnd).Round(time.Millisecond))
	close(stop)
	wg.Wait()
	for i, w := range waiters {
		select {
		case res := <-w:
			if !res.Applied || res.Seq <= seqs[i] {
				t.Fatalf("request %d: result %+v from a reload that started before it (seq then %d)", i, res, seqs[i])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d got no result: lost", i)
		}
	}
	if overlap.Load() != 0 {
		t.Fatalf("%d reloads overlapped another", overlap.Load())
	}
	total := 50 + int(apiCalls.Load())
	t.Logf("%d requests (%d from the API loop) ran as %d reloads", total, apiCalls.Load(), ran.Load())
	if int(ran.Load()) >= total {
		t.Fatalf("%d requests ran %d reloads: nothing was coalesced", total, ran.Load())
	}
}

// A reload applies the token, the query log's sample and path, the API
// address and a new feed file; the reopened query log follows a rename.
func TestReloadAppliesEverySetting(t *testing.T) {
	cfg := func(apiListen string, sample float64, feed string) string {
		s := fmt.Sprintf(`listen: ["127.0.0.1:0"]
api: { listen: %q, token_file: token }
query_log: { path: query.log, sample: %g }
zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: shop.example.com
    ttl: 1
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, apiListen, sample)
		if feed != "" {
			s += "health: { feed_file: " + feed + " }\n"
		}
		return s
	}
	n := startNode(t, map[string]string{
		"steer.yaml": cfg("127.0.0.1:0", 1, ""), "token": "old", "example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	if code, _ := n.call("GET", "/v1/status", "old", ""); code != 200 {
		t.Fatalf("status with the first token: %d", code)
	}
	// Rotate the token, sample less, move the API, add a feed file.
	writeFile(t, n.dir, "token", "new\n")
	writeFile(t, n.dir, "feed.json", `{"pools": {"shop.example.com/primary": {"state": "drain"}}}`)
	oldAPI := n.APIAddr()
	port := dnstest.FreePort(t)
	writeFile(t, n.dir, "steer.yaml", cfg(fmt.Sprintf("127.0.0.1:%d", port), 0.5, "feed.json"))
	res, err := n.Reload(context.Background())
	if err != nil {
		t.Fatalf("reload: %v %+v", err, res)
	}
	for _, want := range []string{"query_log.sample 1 -> 0.5", "api.listen 127.0.0.1:0 -> 127.0.0.1:" + strconv.Itoa(port), "health.feed_file"} {
		if !strings.Contains(strings.Join(res.Changed, "\n"), want) {
			t.Errorf("result does not say %q changed: %q", want, res.Changed)
		}
	}
	if n.APIAddr() != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Fatalf("API on %s after the reload", n.APIAddr())
	}
	if code, _ := callAPI(t, oldAPI, "GET", "/healthz", "", ""); code != 0 {
		t.Errorf("the old API address still answers (%d)", code)
	}
	if code, _ := n.call("GET", "/v1/status", "old", ""); code != 401 {
		t.Errorf("the old token after rotation: %d, want 401", code)
	}
	if code, body := n.call("GET", "/v1/status", "new", ""); code != 200 || !strings.Contains(body, `"drain"`) {
		t.Errorf("the new token: %d; the feed's drain should show: %s", code, body)
	}
	if got := n.a("shop.example.com"); got != "192.0.2.2" {
		t.Errorf("the feed added by the reload drains primary: got %s", got)
	}
	// logrotate: rename the file, reload, and a new file is written.
	logPath := filepath.Join(n.dir, "query.log")
	for i := 0; i < 20; i++ {
		n.query("www.example.com", 1)
	}
	dnstest.WaitFor(t, 3*time.Second, "query.log has lines", func() bool { b, _ := os.ReadFile(logPath); return len(b) > 0 })
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		n.query("www.example.com", 1)
	}
	dnstest.WaitFor(t, 3*time.Second, "a new query.log after rename + reload", func() bool { b, _ := os.ReadFile(logPath); return len(b) > 0 })
	// A rejected reload changes nothing: a missing token file.
	os.Remove(filepath.Join(n.dir, "token"))
	res, err = n.Reload(context.Background())
	if err == nil || res.Applied || !strings.Contains(strings.Join(res.Problems, "\n"), "token_file") {
		t.Fatalf("a missing token file must reject the reload: %v %+v", err, res)
	}
	if code, _ := n.call("GET", "/v1/status", "new", ""); code != 200 {
		t.Errorf("after a rejected reload the token in force must stay: %d", code)
	}
	// A restart-only setting is named.
	writeFile(t, n.dir, "token", "new")
	writeFile(t, n.dir, "steer.yaml", cfg(fmt.Sprintf("127.0.0.1:%d", port), 0.5, "feed.json")+`anycast:
  router_id: 192.0.2.1
  local_as: 64512
  prefixes: [192.0.2.0/24]
  peers: [{ address: 127.0.0.1, port: 1, remote_as: 64513 }]
`)
	res, err = n.Reload(context.Background())
	if err != nil || len(res.RestartNeeded) != 1 || !strings.Contains(res.RestartNeeded[0], "anycast") {
		t.Fatalf("an anycast change must be named as needing a restart: %v %+v", err, res)
	}
}

// A change of health that lands while a reload swaps in a new table is
// neither lost nor left on the old table: after each race between an
// override and a reload that compiles a new table, and after one more
// such reload alone, the answer follows the override.
func TestHealthChangeDuringSwap(t *testing.T) {
	cfg := func(ttl int) string {
		return fmt.Sprintf(`listen: ["127.0.0.1:0"]
api: { listen: "127.0.0.1:0", token_file: token }
zones:
  - { origin: example.com, file: example.com.zone }
records:
  - name: shop.example.com
    ttl: %d
    pools:
      primary: { address: 192.0.2.1 }
      backup:  { address: 192.0.2.2 }
    rules:
      - default: { failover: [primary, backup] }
`, ttl)
	}
	n := startNode(t, map[string]string{
		"steer.yaml": cfg(1), "token": "tok", "example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	for i := range 12 {
		state, want := "down", "192.0.2.2"
		if i%2 == 1 {
			state, want = "auto", "192.0.2.1"
		}
		writeFile(t, n.dir, "steer.yaml", cfg(i+2)) // a new table
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.Reload(context.Background()); err != nil {
				t.Errorf("reload %d: %v", i, err)
			}
		}()
		if code, body := n.call("PUT", "/v1/targets/192.0.2.1/state", "tok", `{"state":"`+state+`"}`); code != 204 {
			t.Fatalf("override %s: %d %s", state, code, body)
		}
		wg.Wait()
		if got := n.a("shop.example.com"); got != want {
			t.Fatalf("round %d: target %s, answer %s, want %s", i, state, got, want)
		}
		writeFile(t, n.dir, "steer.yaml", cfg(i+100))
		if _, err := n.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := n.a("shop.example.com"); got != want {
			t.Fatalf("round %d, after a reload: target %s, answer %s, want %s", i, state, got, want)
		}
	}
}

// The listener a reload binds at a new api.listen asks for the new token
// from its first request, before the reload commits: a reload that is
// slow to finish never opens an unauthenticated window.
func TestMovedAPIAuthenticatedBeforeCommit(t *testing.T) {
	n := startNode(t, map[string]string{
		"steer.yaml": oneZone, "token": "old", "example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	port := dnstest.FreePort(t)
	writeFile(t, n.dir, "token", "new\n")
	writeFile(t, n.dir, "steer.yaml", strings.Replace(oneZone, `api: { listen: "127.0.0.1:0"`, fmt.Sprintf(`api: { listen: "127.0.0.1:%d"`, port), 1))
	cfg, err := loadConfig(filepath.Join(n.dir, "steer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := n.api.prepare(cfg) // what a reload does first; commit comes last
	if err != nil {
		t.Fatal(err)
	}
	defer ch.abort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if ch.bound != addr {
		t.Fatalf("prepared listener at %q, want %s", ch.bound, addr)
	}
	for _, c := range []struct {
		token string
		want  int
	}{{"", 401}, {"old", 401}, {"new", 200}} {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/status", ""},
			{"PUT", "/v1/targets/192.0.2.1/state", `{"state":"down"}`},
		} {
			code, body := callAPI(t, addr, req.method, req.path, c.token, req.body)
			if c.want == 401 && code != 401 || c.want == 200 && code == 401 {
				t.Errorf("%s %s with token %q on the prepared address: %d %s, want %d", req.method, req.path, c.token, code, body, c.want)
			}
		}
	}
	// The old address is untouched until commit.
	if code, _ := n.call("GET", "/v1/status", "old", ""); code != 200 {
		t.Fatalf("old address with the old token before commit: %d", code)
	}
}
