package simulate

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The canary example's population, shortened to 2 hours with a drain at
// 1 h and 400 equally busy client subnets, so the real engine runs it in a test.
const outputCanaryScenario = `
duration: 2h
bin: 1m
runs: 8
seed: 1
record: shop.example.com
clients:
  - name: americas
    from_geodb: {countries: [US, CA, BR], subnets: 400, zipf: 0}
    rate: 1000
resolvers:
  - {name: bigpublic, share: 0.20, count: 1, caches: 1, address: 8.8.8.8, ecs: false}
  - {name: isp-small, share: 0.80, count: 400, caches: 1, ecs: false}
events:
  - at: 1h
    drain: us-east-canary
`

// TestOutputFromEngine writes and explains what the real engine
// predicts for the canary population against the Larkbook demo.
func TestOutputFromEngine(t *testing.T) {
	m := mustCompile(t, mustParse(t, "canary.yaml", outputCanaryScenario), larkbook(t))
	r, err := Run(context.Background(), m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	text := Summary(r)
	lines := summaryLines(t, text)
	t.Logf("summary:\n%s", text)
	summaryHas(t, text,
		"steer simulate: shop.example.com\n",
		"simulated 2 h in 120 bins of 1 min, 8 runs (seeds 1…8), 1,000 user q/s on average",
		`phases: 00:00 "start"; 01:00 "drain us-east-canary"`,
		`us-east-canary in "start": configured 5.0 %`,
		"biggest excursion: us-east-canary reached",
		"why: resolver site bigpublic holds ", " of the users and cached the us-east-canary answer for its TTL: ",
		`us-east-canary drained at 01:00 ("drain us-east-canary") is safe (≤ 1 % of user queries) at +`,
		"(no user queries: ",
	)
	// The cost table: both sites in both phases; the big site's single
	// cache asks about once per TTL (1/60 s).
	for _, want := range []string{"start                 bigpublic ", "drain us-east-canary  isp-small "} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, "  "+want)
		}
		if !found {
			t.Errorf("no cost row %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "0.0167") {
		t.Errorf("bigpublic's 1/60 q/s is not in the cost table:\n%s", text)
	}

	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j ResultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Bins) != 120 || j.DurationS != 7200 || len(j.Drains) != 1 || j.Drains[0].AtS != 3600 {
		t.Errorf("result.json: %d bins, %v s, drains %+v", len(j.Bins), j.DurationS, j.Drains)
	}
	canary := indexOfName(j.Pools, "us-east-canary")
	if canary < 0 || math.Abs(j.Bins[0].Configured[canary]-0.05) > 0.005 || j.Bins[119].Configured[canary] != 0 {
		t.Errorf("pools %v: the canary's configured share is not 0.05 then 0 after the drain", j.Pools)
	}
	img := decodePNG(t, filepath.Join(dir, "share.png"))
	// The canary is the second pool drawn (the others have no users).
	if n := bandPixels(img, 1); n < 500 {
		t.Errorf("share.png: %d pixels of the canary's band", n)
	}
	checkSVG(t, filepath.Join(dir, "share.svg"), "drain us-east-canary (01:00)")
}
