package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/simulate"
)

// simCanary is a small canary population for the demo's
// shop.example.com (95/5 us-east / us-east-canary in the Americas; the
// /16 is in the US in the embedded database): one public resolver with
// a fifth of the users, 100 small ones with the rest; the canary is
// drained after an hour.
const simCanary = `duration: 2h
bin: 1m
runs: 4
record: shop.example.com
clients:
  - name: americas
    prefixes: [24.0.0.0/16]
    rate: 1000
resolvers:
  - name: bigpublic
    share: 0.2
    address: 8.8.8.8
  - name: isp
    share: 0.8
    count: 100
events:
  - { at: 1h, drain: us-east-canary }
`

// resultDoc is the part of result.json the tests read.
type resultDoc struct {
	Record string   `json:"record"`
	Pools  []string `json:"pools"`
	Runs   int      `json:"runs"`
	Seed   uint64   `json:"seed"`
	Bins   []struct {
		StartS float64 `json:"start_s"`
		Share  []struct {
			Mean float64 `json:"mean"`
		} `json:"share"`
	} `json:"bins"`
	Drains []struct {
		Pool    string `json:"pool"`
		SafeAtS struct {
			P50, P95 float64
		} `json:"safe_at_s"`
		Never int `json:"never"`
	} `json:"drains"`
}

// canaryMean is the mean share of pool over the bins before limit
// seconds.
func (r *resultDoc) mean(t *testing.T, pool string, limit float64) float64 {
	t.Helper()
	pi := -1
	for i, p := range r.Pools {
		if p == pool {
			pi = i
		}
	}
	if pi < 0 {
		t.Fatalf("no pool %s in %v", pool, r.Pools)
	}
	sum, n := 0.0, 0
	for _, b := range r.Bins {
		if b.StartS < limit {
			sum += b.Share[pi].Mean
			n++
		}
	}
	return sum / float64(n)
}

func TestSimulateCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	scenario := filepath.Join(dir, "canary.yaml")
	os.WriteFile(scenario, []byte(simCanary), 0o644)
	out := filepath.Join(dir, "out")

	for _, args := range [][]string{
		{},
		{"--scenario", scenario},
		{"--out", out},
		{"--scenario", scenario, "--out", out, "extra"},
		{"--scenario", scenario, "--out", out, "--ttl", "60s"},
		{"--scenario", scenario, "--out", out, "--runs", "0"},
		{"--scenario", scenario, "--out", out, "--nosuchflag"},
		{"--from-log", scenario, "--out", out, "--sample", "2"},
	} {
		if code, _, stderr := runCapture(append([]string{"simulate"}, args...)...); code != 2 {
			t.Errorf("simulate %s: exit %d, want 2 (usage)\n%s", strings.Join(args, " "), code, stderr)
		}
	}

	// A bad scenario: file:line, exit 1.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(simCanary, "drain: us-east-canary", "drain: nosuchpool", 1)), 0o644)
	code, _, stderr := runCapture("simulate", "--scenario", bad, "--out", out)
	if code != 1 || !strings.Contains(stderr, bad+":17:") || !strings.Contains(stderr, "nosuchpool") {
		t.Errorf("unknown pool: exit %d, want 1 and %s:17: naming it\n%s", code, bad, stderr)
	}
	// A bad configuration: its file:line, exit 1.
	conf := filepath.Join(dir, "steer.yaml")
	os.WriteFile(conf, []byte("records:\n  - name: shop.example.com\n    ttl: -1\n"), 0o644)
	code, _, stderr = runCapture("simulate", "--config", conf, "--scenario", scenario, "--out", out)
	if code != 1 || !strings.Contains(stderr, conf+":") {
		t.Errorf("bad config: exit %d, want 1 and %s:line\n%s", code, conf, stderr)
	}

	// The demo (no --config here: STEER_DEFAULT_CONFIG names no file).
	code, stdout, stderr := runCapture("simulate", "--scenario", scenario, "--out", out, "--seed", "7", "--runs", "3")
	if code != 0 {
		t.Fatalf("simulate: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "shop.example.com") || !strings.Contains(stdout, "us-east-canary") {
		t.Errorf("the summary names neither the record nor the canary:\n%s", stdout)
	}
	for _, f := range []string{"share.csv", "result.json", "share.png", "share.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
		if !strings.Contains(stderr, f) {
			t.Errorf("%s is not listed as written:\n%s", f, stderr)
		}
	}
	var res resultDoc
	data, _ := os.ReadFile(filepath.Join(out, "result.json"))
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if res.Runs != 3 || res.Seed != 7 || len(res.Bins) != 120 {
		t.Errorf("result: %d runs seed %d, %d bins; want --runs 3 --seed 7 and 120 bins", res.Runs, res.Seed, len(res.Bins))
	}
	// The canary's share before the drain averages its weight; after
	// the drain's first few minutes (TTL 60 s) it is gone.
	if m := res.mean(t, "us-east-canary", 3600); m < 0.03 || m > 0.07 {
		t.Errorf("canary's mean share before the drain %.3f, want 0.05 ± 0.02", m)
	}
	if len(res.Drains) != 1 || res.Drains[0].Pool != "us-east-canary" || res.Drains[0].Never != 0 ||
		res.Drains[0].SafeAtS.P95 <= 0 || res.Drains[0].SafeAtS.P95 > 300 {
		t.Errorf("drain: %+v, want the canary safe within 5 minutes (TTL 60 s)", res.Drains)
	}

	// A config event: the next file, relative to the scenario, read as
	// steer would read it; its 50/50 split is configured from then on.
	larkbook, err := os.ReadFile("../../examples/larkbook/steer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(strings.Replace(string(larkbook), "weight: 95", "weight: 50", 1), "weight: 5 }", "weight: 50 }", 1)
	os.WriteFile(filepath.Join(dir, "next.yaml"), []byte(next), 0o644)
	os.WriteFile(scenario+".next", []byte(strings.Replace(simCanary, "drain: us-east-canary", "config: next.yaml", 1)), 0o644)
	code, _, stderr = runCapture("simulate", "--config", "../../examples/larkbook/steer.yaml", "--scenario", scenario+".next", "--out", out, "--runs", "2", "--json")
	if code != 0 {
		t.Fatalf("config event: exit %d\n%s", code, stderr)
	}
	var cfgRes struct {
		Pools []string `json:"pools"`
		Bins  []struct {
			Configured []float64 `json:"configured"`
		} `json:"bins"`
	}
	data, _ = os.ReadFile(filepath.Join(out, "result.json"))
	if err := json.Unmarshal(data, &cfgRes); err != nil || len(cfgRes.Bins) != 120 {
		t.Fatalf("config event: %v, %d bins", err, len(cfgRes.Bins))
	}
	for i, p := range cfgRes.Pools {
		if p == "us-east-canary" {
			if a, b := cfgRes.Bins[30].Configured[i], cfgRes.Bins[90].Configured[i]; math.Abs(a-0.05) > 0.005 || math.Abs(b-0.5) > 0.02 {
				t.Errorf("canary configured %.3f before the config event and %.3f after, want 0.05 and 0.5", a, b)
			}
		}
	}

	// --json: the same result on stdout, and nothing else there.
	code, stdout, stderr = runCapture("simulate", "--scenario", scenario, "--out", out, "--seed", "7", "--runs", "3", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d\n%s", code, stderr)
	}
	var again resultDoc
	if err := json.Unmarshal([]byte(stdout), &again); err != nil {
		t.Fatalf("--json printed no JSON: %v\n%s", err, stdout)
	}
	if again.Runs != 3 || again.Seed != 7 || len(again.Bins) != 120 || again.mean(t, "us-east-canary", 3600) != res.mean(t, "us-east-canary", 3600) {
		t.Errorf("--json differs from result.json of the same seed")
	}
}

// TestSimulateAPI: POST /v1/simulate on a running node, against what it
// serves.
func TestSimulateAPI(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", dnstest.FreePort(t))
	writeAtomic(t, filepath.Join(dir, "token"), "s3cret\n")
	writeAtomic(t, filepath.Join(dir, "example.com.zone"), zoneText(1, "x"))
	writeAtomic(t, filepath.Join(dir, "steer.yaml"), fmt.Sprintf(`listen: [%q]
api: { listen: %q, token_file: token }
zones:
  - origin: example.com
    file: example.com.zone
records:
  - name: shop.example.com
    ttl: 60
    pools:
      stable: { address: 192.0.2.30 }
      canary: { address: 192.0.2.31 }
    rules:
      - default:
          split:
            - { pool: stable, weight: 95 }
            - { pool: canary, weight: 5 }
`, addr, apiAddr))
	startSteer(t, filepath.Join(dir, "steer.yaml"))
	post := func(ctype, body string) (int, string) {
		return apiCall(t, apiAddr, "s3cret", "POST", "/v1/simulate", ctype, body)
	}
	scenario := strings.Replace(strings.Replace(simCanary, "us-east-canary", "canary", 1), "runs: 4", "runs: 3", 1)
	if code, body := apiCall(t, apiAddr, "", "POST", "/v1/simulate", "application/yaml", scenario); code != 401 {
		t.Fatalf("without the token: %d %s", code, body)
	}
	code, body := post("application/yaml", scenario)
	if code != 200 {
		t.Fatalf("canary: %d %s", code, body)
	}
	var resp struct {
		Result  resultDoc `json:"result"`
		Summary string    `json:"summary"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if resp.Summary == "" || resp.Result.Record != "shop.example.com." || len(resp.Result.Bins) != 120 {
		t.Fatalf("response: record %q, %d bins, summary %q", resp.Result.Record, len(resp.Result.Bins), resp.Summary)
	}
	if m := resp.Result.mean(t, "canary", 3600); m < 0.03 || m > 0.07 {
		t.Errorf("canary's mean share %.3f, want 0.05 ± 0.02", m)
	}
	if m := resp.Result.mean(t, "stable", 3600); m < 0.93 || m > 0.97 {
		t.Errorf("stable's mean share %.3f, want 0.95 ± 0.02", m)
	}
	// A bad scenario: 400 naming its line in the request.
	bad := strings.Replace(scenario, "drain: canary", "drain: nosuchpool", 1)
	code, body = post("application/yaml", bad)
	if code != 400 || !strings.Contains(body, "request:17:") {
		t.Errorf("unknown pool: %d %s, want 400 naming request:17", code, body)
	}
	// Oversized: 413.
	code, body = post("application/yaml", scenario+"#"+strings.Repeat("x", 256<<10)+"\n")
	if code != 413 {
		t.Errorf("oversized: %d %s, want 413", code, body)
	}
	// Too big to run here: the limit, named.
	code, body = post("application/yaml", strings.Replace(scenario, "runs: 3", "runs: 500", 1))
	if code != 400 || !strings.Contains(body, "50") || !strings.Contains(body, "request:") {
		t.Errorf("500 runs: %d %s, want 400 naming the limit of 50 and the line", code, body)
	}
	// The simulation's drain was the simulation's: the node serves on
	// with both pools up.
	r, err := query(addr, "shop.example.com.", dns.TypeA)
	if err != nil || len(r.Answer) == 0 {
		t.Fatalf("the node after simulating: %v %v", r, err)
	}
	code, body = apiCall(t, apiAddr, "s3cret", "GET", "/v1/status", "", "")
	if code != 200 || strings.Contains(body, `"drain"`) || strings.Count(body, `"state": "up"`) < 2 {
		t.Errorf("status after simulating a drain: %d %s", code, body)
	}
}

// queryLog writes a query log of shop.example.com misses as steer
// writes it: a public resolver that asks again as soon as its entry
// expires (saturated), and small resolvers that ask now and then, one
// of them sending ECS.
func queryLog(t *testing.T, path string) {
	t.Helper()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	line := func(at time.Duration, client, ecs string) {
		e := map[string]any{"time": start.Add(at).Format(time.RFC3339Nano), "client": client, "name": "shop.example.com.",
			"type": "A", "rcode": "NOERROR", "rule": 3, "pool": "us-east", "answers": []string{"shop.example.com.\t60\tIN\tA\t192.0.2.30"},
			"duration_us": 12.5, "transport": "udp"}
		if ecs != "" {
			e["ecs"], e["scope"] = ecs, 24
		}
		js, _ := json.Marshal(e)
		b.Write(append(js, '\n'))
	}
	for i := range 60 {
		at := time.Duration(i) * 60500 * time.Millisecond
		line(at, "8.8.8.8", "")
		if i%5 == 0 {
			line(at+7*time.Second, "24.0.1.53", "")
			line(at+11*time.Second, "24.0.2.53", "24.0.2.0/24")
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSimulateFromLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "queries.log")
	queryLog(t, log)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCapture("simulate", "--from-log", log, "--out", out)
	if code != 0 {
		t.Fatalf("--from-log: exit %d\n%s\n%s", code, stdout, stderr)
	}
	pop := filepath.Join(out, "population.yaml")
	if !strings.Contains(stdout, "population: "+pop) || !strings.Contains(stdout, "TTL 1m: the TTL of shop.example.com. in the embedded demo") {
		t.Errorf("output:\n%s", stdout)
	}
	if !strings.Contains(stdout, "8.8.8.8") || !strings.Contains(stdout, "saturated") {
		t.Errorf("the report does not flag the public resolver as saturated:\n%s", stdout)
	}
	// The population is a scenario steer simulate reads.
	if _, err := simulate.LoadScenario(pop); err != nil {
		data, _ := os.ReadFile(pop)
		t.Fatalf("population.yaml: %v\n%s", err, data)
	}
	// --ttl, and a record the log does not have.
	if code, stdout, _ := runCapture("simulate", "--from-log", log, "--out", out, "--ttl", "30s", "--sample", "0.5"); code != 0 ||
		!strings.Contains(stdout, "TTL 30s (--ttl); sample 0.5") {
		t.Errorf("--ttl 30s --sample 0.5: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCapture("simulate", "--from-log", log, "--out", out, "--record", "www.example.com"); code != 1 {
		t.Errorf("--record www.example.com: exit %d\n%s", code, stderr)
	}

	// With a scenario: its timeline on the log's population.
	timeline := filepath.Join(dir, "timeline.yaml")
	os.WriteFile(timeline, []byte(simCanary), 0o644)
	os.Remove(filepath.Join(out, "result.json"))
	code, stdout, stderr = runCapture("simulate", "--from-log", log, "--scenario", timeline, "--out", out, "--runs", "2")
	if code != 0 {
		t.Fatalf("--from-log --scenario: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res resultDoc
	data, _ := os.ReadFile(filepath.Join(out, "result.json"))
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if res.Runs != 2 || len(res.Bins) != 120 || len(res.Drains) != 1 {
		t.Errorf("the scenario's timeline (2h in 1m bins, a drain) on the log's population: %d runs, %d bins, %d drains", res.Runs, len(res.Bins), len(res.Drains))
	}
}

// Ctrl-C stops a long simulation at once, saying so, and writes nothing.
func TestSimulateInterrupt(t *testing.T) {
	t.Parallel() // a subprocess waited on: overlaps the others
	dir := t.TempDir()
	scenario := filepath.Join(dir, "long.yaml")
	long := strings.Replace(strings.Replace(simCanary, "duration: 2h", "duration: 7d", 1), "runs: 4", "runs: 1000", 1)
	os.WriteFile(scenario, []byte(strings.Replace(long, "at: 1h", "at: 100h", 1)), 0o644)
	out := filepath.Join(dir, "out")
	cmd := exec.Command(steerBin, "simulate", "--scenario", scenario, "--out", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "simulating ") {
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(strings.Join(lines, "\n"), "interrupted") {
		t.Fatalf("after SIGINT: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if took > 5*time.Second {
		t.Errorf("stopped %s after SIGINT", took)
	}
	if _, err := os.Stat(filepath.Join(out, "result.json")); err == nil {
		t.Error("an interrupted simulation wrote result.json")
	}
}

// TestSimulateLoadFlags: --load and its companions predict capacity
// feedback for a scenario without a capacity section: the summary says
// it, --json carries it per interval, --load-file reads the node's load
// file format; bad values are usage errors, a pool without a capacity
// is named.
func TestSimulateLoadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	db, _ := filepath.Abs("../../testdata/geo/larkbook-country-flat.mmdb")
	conf := filepath.Join(dir, "steer.yaml")
	os.WriteFile(conf, []byte(`geo: { databases: [`+db+`] }
ecs: { enabled: true }
load: { max_shift: 0.25 }
records:
  - name: c.example.com
    ttl: 5
    pools:
      a: { address: 192.0.2.1, capacity: { target: 100, max: 200 } }
      b: { address: 192.0.2.2 }
    rules:
      - match: { cidr: [10.0.0.0/16, 10.2.0.0/16] }
        failover: [a, b]
      - match: { cidr: [10.1.0.0/16, 10.3.0.0/16] }
        failover: [a, b]
      - default: { pool: b }
`), 0o644)
	scenario := filepath.Join(dir, "s.yaml")
	os.WriteFile(scenario, []byte(`duration: 2m
record: c.example.com
clients:
  - { name: all, prefixes: [10.0.0.0/14], subnets: 64, rate: 100 }
resolvers:
  - { name: ecs, share: 1, ecs: true }
`), 0o644)
	loadFile := filepath.Join(dir, "load.json")
	os.WriteFile(loadFile, []byte(`{"loads": [{"record": "c.example.com", "pool": "a", "current-load": 90, "timestamp": "2026-01-02T03:04:05Z"}]}`), 0o644)
	for _, args := range [][]string{
		{"--load", "a"}, {"--load", "a=-1"}, {"--load", "a=150", "--load-model", "linear"},
		{"--load", "a=150", "--load-interval", "0s"}, {"--load", "a=150", "--load-intervals", "0"},
	} {
		if code, _, stderr := runCapture(append([]string{"simulate", "--config", conf, "--scenario", scenario, "--out", out}, args...)...); code != 2 {
			t.Errorf("simulate %s: exit %d, want 2 (usage)\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	if code, _, stderr := runCapture("simulate", "--config", conf, "--scenario", scenario, "--out", out, "--load", "b=5"); code != 1 ||
		!strings.Contains(stderr, "pool b of c.example.com declares no capacity") {
		t.Errorf("--load on a pool without capacity: exit %d, want 1 naming it\n%s", code, stderr)
	}
	code, stdout, stderr := runCapture("simulate", "--config", conf, "--scenario", scenario, "--out", out, "--runs", "1",
		"--load", "a=150", "--load-model", "proportional", "--load-interval", "10s")
	if code != 0 || !strings.Contains(stdout, "capacity feedback") || !strings.Contains(stdout, "a 100.0 % of users") ||
		!strings.Contains(stdout, "shed: load 150 % of target") || !strings.Contains(stdout, "/16 → b") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "capacity.csv") {
		t.Errorf("capacity.csv is not listed as written:\n%s", stderr)
	}
	code, stdout, stderr = runCapture("simulate", "--config", conf, "--scenario", scenario, "--out", out, "--json", "--runs", "1",
		"--load-file", loadFile, "--load-interval", "10s", "--load-intervals", "3")
	var res struct {
		Capacity struct {
			Model string `json:"model"`
			Steps []struct {
				Pools []struct {
					Pool, State string
					Load        float64
				} `json:"pools"`
			} `json:"steps"`
		} `json:"capacity"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
		t.Fatalf("--json --load-file: exit %d, %v\n%s", code, err, stderr)
	}
	if c := res.Capacity; c.Model != "fixed" || len(c.Steps) != 3 || c.Steps[0].Pools[0].Load != 90 || c.Steps[0].Pools[0].State != "ok" {
		t.Errorf("--load-file: capacity %+v, want 3 fixed steps of 90 (the load file's, below the target)", c)
	}
}
