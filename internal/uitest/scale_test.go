package uitest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTenThousandRecords: an overview of 10,000 steered names sharing one
// policy stays usable: the first page renders within 2 s, and the
// steps an operator takes to reach the 9,000th record (filtering by its
// name, paging) each redraw within 2 s. Every time is logged.
func TestTenThousandRecords(t *testing.T) {
	t.Parallel() // waits on processes: overlaps the others
	const n = 10_000
	b := browser(t)
	dir := t.TempDir()
	ports := freePorts(t, 2)
	api := fmt.Sprintf("127.0.0.1:%d", ports[1])
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `listen: ["127.0.0.1:%d"]
api: { listen: %q, token_file: token }
zones:
  - origin: example.com
    file: zones/example.com.zone
policies:
  larkbook-geo:
    rules:
      - match: { country: [IN, LK, BD, NP] }
        pool: ap-south
      - match: { continent: EU }
        pool: eu-central
      - default: { pool: us-east }
records:
`, ports[0], api)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&cfg, `  - name: r%05d.example.com
    ttl: 60
    policy: larkbook-geo
    pools:
      ap-south:   { address: 203.0.113.%d, location: { lat: 19.08, lon: 72.88 } }
      eu-central: { address: 198.51.100.%d, location: { lat: 50.11, lon: 8.68 } }
      us-east:    { address: 192.0.2.%d, location: { lat: 38.95, lon: -77.45 } }
`, i, i%250+1, i%250+1, i%250+1)
	}
	write(t, filepath.Join(dir, "token"), token+"\n")
	write(t, filepath.Join(dir, "zones/example.com.zone"), zone(t))
	config := write(t, filepath.Join(dir, "steer.yaml"), cfg.String())
	start := time.Now()
	startSteer(t, config)
	t.Logf("steer serving %d records after %v", n, time.Since(start).Round(time.Millisecond))

	p := b.NewPage(t, "http://"+api)
	p.Login(token)
	// Each time is the best of up to three tries: this machine is shared
	// by many tests, and one slow try is the scheduler's, while three
	// are the page's.
	var render time.Duration
	var bytes int64
	var reqs int
	for try := range 3 {
		p.ResetWeight()
		p.Navigate("/ui/")
		r := p.RenderTime("table#records tr.pool-row", 10*time.Second)
		p.WaitText("span#page-info", "10", 5*time.Second)
		if try == 0 || r < render {
			render = r
		}
		if try == 0 {
			bytes, reqs = p.Weight()
		}
		t.Logf("first page of %d records, try %d: rendered %v after navigation start", n, try+1, r.Round(time.Millisecond))
		if r <= firstPageBound {
			break
		}
	}
	info := p.Texts("span#page-info")
	rows := p.Count("table#records tr.pool-row")
	t.Logf("first page of %d records: rendered %v after navigation start, %d pool rows, page info %q, %d bytes in %d requests",
		n, render.Round(time.Millisecond), rows, info, bytes, reqs)
	if render > firstPageBound {
		t.Errorf("the first page of %d records rendered after %v, want < %v", n, render, firstPageBound)
	}
	if len(info) != 1 || !strings.Contains(strings.ReplaceAll(strings.ReplaceAll(info[0], ",", ""), " ", ""), "10000") {
		t.Errorf("page info %q does not say 10000 records", info)
	}
	if rows == 0 || rows > 3*1000 {
		t.Errorf("%d pool rows on the first page: not paged", rows)
	}

	// The steps an operator takes, each from the state the one before
	// leaves: an action in the page, and what the page shows after it.
	firstRecord := `(document.querySelector('table#records tr.pool-row') || {dataset: {}}).dataset.record`
	shows := func(name string) string { return firstRecord + ` === '` + name + `'` }
	filter := func(v string) string {
		return fmt.Sprintf(`(() => { const f = document.getElementById('filter'); f.value = %q; f.dispatchEvent(new Event('input', {bubbles: true})); f.dispatchEvent(new Event('change', {bubbles: true})); })()`, v)
	}
	next, prev := `document.getElementById('page-next').click()`, `document.getElementById('page-prev').click()`
	steps := []struct{ what, action, cond string }{
		{"the first page", "", shows("r00001.example.com.")},
		{"next page", next, shows("r00101.example.com.")},
		{"next page again", next, shows("r00201.example.com.")},
		{"previous page", prev, shows("r00101.example.com.")},
		// The 9,000th record by its name, typed into the filter.
		{"filter to r09000 (the 9,000th record)", filter("r09000"),
			`document.querySelectorAll('table#records tr.pool-row').length > 0 && Array.from(document.querySelectorAll('table#records tr.pool-row')).every((r) => r.dataset.record === 'r09000.example.com.')`},
		// A wider filter pages too: r08 matches 1,000 records.
		{"filter to r08 (1,000 records)", filter("r08"), shows("r08000.example.com.")},
		{"the next page of r08", next, shows("r08100.example.com.")},
		{"clear the filter", filter(""), shows("r00001.example.com.")},
	}
	for i := 1; i < len(steps); i++ {
		s := steps[i]
		var best time.Duration
		var tries []string
		for try := range 3 {
			if try > 0 { // back to the state before, untimed: reload, replay
				p.Navigate("/ui/")
				p.WaitFor(10*time.Second, steps[0].what, steps[0].cond)
				for _, b := range steps[1:i] {
					p.Timed(b.what, b.action, b.cond, 10*time.Second)
				}
			}
			took := p.Timed(s.what, s.action, s.cond, 10*time.Second)
			tries = append(tries, took.Round(time.Millisecond).String())
			if try == 0 || took < best {
				best = took
			}
			if best <= stepBound {
				break
			}
		}
		t.Logf("%s: %v (tries: %s)", s.what, best.Round(time.Millisecond), strings.Join(tries, ", "))
		if best > stepBound {
			t.Errorf("%s took %v at best of three, want < %v", s.what, best, stepBound)
		}
	}
}

// The bounds of the 10,000-record overview: its first page (100 records'
// pools, ≈200 kB of JSON) within twice the bound of Larkbook's first
// render, which TestDashboard asserts; each step within 2 s. Alone on
// this 2-core machine the steps take 0.2–0.7 s; three copies of these
// tests at once, 1.1–1.6 s at best of three.
const (
	firstPageBound = 2 * time.Second
	stepBound      = 2 * time.Second
)
