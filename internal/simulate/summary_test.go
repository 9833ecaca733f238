package simulate

import (
	"strings"
	"testing"
	"time"
)

func summaryLines(t *testing.T, text string) []string {
	t.Helper()
	if !strings.HasSuffix(text, "\n") {
		t.Errorf("summary does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > 40 {
		t.Errorf("summary has %d lines, want one page (≤ 40):\n%s", len(lines), text)
	}
	return lines
}

func summaryHas(t *testing.T, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("summary lacks %q:\n%s", s, text)
		}
	}
}

func summaryLacks(t *testing.T, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(text, s) {
			t.Errorf("summary has %q:\n%s", s, text)
		}
	}
}

func TestSummaryCanary(t *testing.T) {
	r := canaryResult()
	text := Summary(r)
	again := canaryResult()
	again.Elapsed *= 3 // a slower machine
	if Summary(again) != text {
		t.Errorf("summary is not deterministic")
	}
	lines := summaryLines(t, text)
	if lines[0] != "steer simulate: shop.example.com" {
		t.Errorf("first line %q", lines[0])
	}
	summaryHas(t, text,
		"simulated 24 h in 1,440 bins of 1 min, 200 runs (seeds 1…200), 1,000 user q/s on average",
		`phases: 00:00 "start"; 12:00 "drain us-east-canary"`,
		// per pool and phase: configured against observed
		`us-east-canary in "start": configured 5.0 %; observed median 4.0 %, mean 5.0 %, highest p95 24.0 % (05:05); peak 24.8 % in one run (05:05)`,
		`us-east        in "start": configured 95.0 %`, "peak 99.0 % in one run (06:40)",
		"|observed − configured| over all bins: median 0.5 pp (0.4–0.6), p95 8.1 pp (7.5–8.9), max 19.8 pp (17.1–21.0)",
		// the excursion, explained
		"biggest excursion: us-east-canary reached 24.8 % for one minute in one run (bin 05:05, configured 5.0 %)",
		"resolver site bigpublic-us holds 20.0 % of the users and cached the us-east-canary answer for its TTL",
		"20.0 % (bigpublic-us, all on us-east-canary) + 5.0 % of the other 80.0 % = 24.0 %",
		"about one fill in 20", "are spread over isp-small, whose caches average out",
		"a TTL window that straddles two minutes splits the site's 20.0 % between them, so a spike shows as two minutes of about 14.0 % each (4.0 % + 20.0 %/2) rather than one of 24.0 %; 717 of 720 minutes have their p95 over runs in between.",
		// the drain
		`us-east-canary drained at 12:00 ("drain us-east-canary") is safe (≤ 1 % of user queries) at +61 s (p5–p95 +60…+62 s); the last user query reaches it at +60 s (p5–p95 +58…+62 s).`,
		// the cost
		"auth q/s", "entries", "user q/s",
	)
	summaryLacks(t, text, "TTL violators", "not safe before the end", "ECS calculator", "NaN")
	// The drained canary is not listed for the phase where it is out of play.
	summaryLacks(t, text, `us-east-canary in "drain us-east-canary": configured 0.0 %; observed median 0.0 %, mean 0.0 %, highest p95 0.0 %`)
	var costRows int
	for _, l := range lines {
		if strings.Contains(l, "bigpublic-us") && strings.Contains(l, "0.0167") && strings.Contains(l, "200") {
			costRows++
		}
	}
	if costRows != 2 {
		t.Errorf("%d cost rows for bigpublic-us, want one per phase:\n%s", costRows, text)
	}
}

func TestSummaryStraddleOnlyWhenShown(t *testing.T) {
	// A long TTL: the minutes' p95 is the whole spike, not half of
	// it; the straddling sentence would be wrong.
	r := canaryResult()
	for i := range r.Bins {
		if r.Bins[i].Configured[1] > 0 {
			r.Bins[i].Share[1].P95 = 0.24
		}
	}
	text := Summary(r)
	summaryLacks(t, text, "straddles")
	summaryHas(t, text, "cached the us-east-canary answer for its TTL")
}

func TestSummaryDrainViolators(t *testing.T) {
	r := canaryResult()
	r.Drains[0].LastQuery = Band{P5: 2400, P50: 3540, P95: 3600, Mean: 3300}
	r.Drains[0].Never = 3
	text := Summary(r)
	summaryHas(t, text,
		"with TTL violators (resolvers keeping answers past the TTL) the last user query reaches it only at +59m0s (p5–p95 +40m0s…+1h0m0s), long after it is safe",
		"in 3 of 200 runs it was not safe before the end")
	summaryLacks(t, text, "never safe")

	r.Drains[0].Never = 200
	text = Summary(r)
	summaryHas(t, text, `us-east-canary drained at 12:00 ("drain us-east-canary") is never safe (≤ 1 % of user queries) before the end of the simulation; the last user query reaches it at +59m0s`)
	summaryLacks(t, text, "is safe (")
}

func TestSummaryNoDrainsNoDeviation(t *testing.T) {
	r := canaryResult()
	r.Drains, r.Deviation, r.Notable = nil, nil, nil
	text := Summary(r)
	summaryLines(t, text)
	summaryHas(t, text, "drains: none", "biggest excursion: none recorded")
	summaryLacks(t, text, "|observed − configured|", "why:", "drained at")

	// Deviation but nothing notable: the largest deviation in words.
	r = canaryResult()
	r.Notable = nil
	text = Summary(r)
	summaryHas(t, text, "biggest excursion: none notable; every pool stayed within 21.0 pp of its configured share")
}

func TestSummaryOnePool(t *testing.T) {
	text := Summary(onePoolResult())
	lines := summaryLines(t, text)
	summaryHas(t, text,
		"steer simulate: www.example.com",
		"simulated 5 min in 30 bins of 10 s, 1 run (seed 42), 50.0 user q/s on average",
		"share of user queries per pool (per bin;",
		"  only configured 100.0 %; observed median 100.0 %, mean 100.0 %",
		"drains: none",
	)
	summaryLacks(t, text, " in \"start\":", "ECS calculator")
	if len(lines) > 12 {
		t.Errorf("one-pool summary has %d lines", len(lines))
	}
}

func TestSummaryECSCost(t *testing.T) {
	// The ECS cache-cost calculator: the same site with and without
	// ECS (500 q/s, TTL 60 s: one entry against 5,000 /24 scopes).
	r := onePoolResult()
	r.Sites = []string{"bigpublic"}
	r.Cost = []Cost{
		{Phase: "start", Site: "bigpublic", AuthQPS: 71.4, Entries: 4286, UserQPS: 500, ECS: "/24 /56, per source prefix",
			NoECS: CostCase{AuthQPS: 1.0 / 60, Entries: 1}, Scoped: CostCase{AuthQPS: 1.0 / 60, Entries: 1}, PerPrefix: CostCase{AuthQPS: 71.4, Entries: 4286}},
	}
	text := Summary(r)
	summaryHas(t, text,
		"ECS calculator (start; analytic, at mean rates, no TTL stretching): bigpublic (ECS /24 /56, per source prefix): without ECS 0.0167 q/s, 1.00 entries; with ECS and steer's scopes 0.0167 q/s, 1.00 entries (×1.0); per ECS source prefix 71.4 q/s, 4,286 entries (×4,284)",
		"71.4")

	// A config change that turns ECS on for one site: the change from
	// the first to the last phase.
	r.Sites = []string{"bigpublic"}
	r.Phases = append(r.Phases, PhaseInfo{At: time.Minute, Label: "config ecs.yaml"})
	r.Cost = []Cost{
		{Phase: "start", Site: "bigpublic", AuthQPS: 1.0 / 60, Entries: 1, UserQPS: 500},
		{Phase: "config ecs.yaml", Site: "bigpublic", AuthQPS: 9.8, Entries: 600, UserQPS: 500},
	}
	text = Summary(r)
	summaryHas(t, text, `bigpublic: 0.0167 → 9.80 auth q/s (×588) and 1.00 → 600 entries from "start" to "config ecs.yaml"`)
}

func TestSummaryDegenerate(t *testing.T) {
	if got := Summary(nil); got != "steer simulate: no result\n" {
		t.Errorf("Summary(nil) = %q", got)
	}
	text := Summary(&Result{})
	summaryLines(t, text)
	summaryHas(t, text, "pools: none", "drains: none", "cost: none recorded")

	// Many pools, phases and cost rows: still one page.
	r := canaryResult()
	for i := range 20 {
		r.Pools = append(r.Pools, "pool-"+string(rune('a'+i)))
		r.Cost = append(r.Cost, Cost{Phase: "start", Site: "site-" + string(rune('a'+i)), AuthQPS: 1, Entries: 1, UserQPS: 1})
		r.Phases = append(r.Phases, PhaseInfo{At: 12*time.Hour + time.Duration(1+i)*time.Hour/2, Label: "weights " + string(rune('a'+i))})
	}
	for i := range r.Bins {
		for len(r.Bins[i].Share) < len(r.Pools) {
			r.Bins[i].Share = append(r.Bins[i].Share, Band{P5: 0.01, P50: 0.01, P95: 0.01, Mean: 0.01})
		}
	}
	text = Summary(r)
	summaryLines(t, text)
	summaryHas(t, text, "more pools in share.csv", "more rows in cost.csv", "more")
}

func TestSummaryExcursionStories(t *testing.T) {
	// A peak above the one-cache figure: the rest is chance.
	r := canaryResult()
	r.Notable[0].Share = 0.33
	text := Summary(r)
	summaryHas(t, text, "= 24.0 %; in this run the other resolvers added 9.0 pp by chance.",
		"two minutes of about 14.0 % each (4.0 % + 20.0 %/2) rather than one of 24.0 %")

	// A dip (the engine reports none, a hand-made result may).
	r = canaryResult()
	r.Notable = []Excursion{{Bin: 305 * time.Minute, Pool: "us-east", Share: 0.752, Configured: 0.95, Site: "bigpublic-us", SiteShare: 0.20, Runs: 0.97}}
	text = Summary(r)
	summaryHas(t, text, "biggest excursion: us-east fell to 75.2 % for one minute in one run (bin 05:05, configured 95.0 %)",
		"low 75.2 % in one run (05:05)", "its caches held another pool's answer")

	// A peak well below the site's whole share: not one cache's answer
	// (a site of many resolvers); no one-cache arithmetic, no straddling.
	r = canaryResult()
	r.Notable[0] = Excursion{Bin: 190 * time.Minute, Pool: "us-east-canary", Share: 0.204, Configured: 0.05, Site: "isp-small", SiteShare: 0.804, Runs: 1}
	text = Summary(r)
	summaryHas(t, text, "us-east-canary reached 20.4 % for one minute in one run (bin 03:10, configured 5.0 %)",
		"resolver site isp-small (80.4 % of the users) carried most of the excess")
	summaryLacks(t, text, "cached the us-east-canary answer for its TTL", "straddles", "one fill in 20")

	// Pools without user queries (other regions' pools of the record)
	// are named once, not listed with zeros.
	r = canaryResult()
	r.Pools = append(r.Pools, "eu-central", "ap-south")
	for i := range r.Bins {
		r.Bins[i].Share = append(r.Bins[i].Share, Band{}, Band{})
		r.Bins[i].Configured = append(r.Bins[i].Configured, 0, 0)
	}
	r.Deviation = append(r.Deviation, Deviation{Pool: "eu-central"}, Deviation{Pool: "ap-south"})
	text = Summary(r)
	summaryHas(t, text, "  (no user queries: eu-central, ap-south)\n")
	summaryLacks(t, text, "eu-central configured", "eu-central in")
	if n := strings.Count(text, "|observed − configured|"); n != 2 {
		t.Errorf("%d deviation lines, want 2 (the pools in play):\n%s", n, text)
	}
}

func TestSummaryExcursionAfterDrain(t *testing.T) {
	// The largest excess is the minute of the drain: answers cached
	// before it, not a cache drawing the pool.
	r := canaryResult()
	r.Notable = []Excursion{{Bin: 12 * time.Hour, Pool: "us-east-canary", Share: 0.026, Configured: 0, Site: "isp-small", SiteShare: 0.8, Runs: 1}}
	text := Summary(r)
	summaryHas(t, text,
		"biggest excursion: us-east-canary reached 2.6 % for one minute in one run (bin 12:00, configured 0.0 %)",
		`why: it is the minute of "drain us-east-canary" (12:00), which lowered us-east-canary from 5.0 % to 0.0 %: caches filled before it keep the old answer until their TTL ends; resolver site isp-small (80.0 % of the users) held most of it.`)
	summaryLacks(t, text, "carried most of the excess", "straddles")

	r.Notable[0].Bin = 12*time.Hour + 2*time.Minute
	summaryHas(t, Summary(r), `why: it is +2m0s after "drain us-east-canary" (12:00)`)

	// Long after the drain it is not the drain's doing.
	r.Notable[0].Bin = 13 * time.Hour
	summaryLacks(t, Summary(r), "after \"drain")
}
