package ui_test

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/uitest"
)

// TestOverviewPages renders the overview (10,000 records) and a record
// page from the fixture API in headless Chromium and checks the DOM
// contract the browser tests select by, then how the overview behaves:
// a health change arriving as an event shows within 2 s without losing
// the focused link or the filter, paging, the state filter, "/" and j/k.
func TestOverviewPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	f := newOvFixture(10000, time.Now())
	f.events = true
	srv := httptest.NewServer(f.handler(ovAssets()))
	// Cleanups run last first: the browser (and its event stream) goes
	// before the server waits for its requests to end.
	t.Cleanup(srv.Close)
	b := uitest.Start(t, uitest.Options{})
	p := b.NewPage(t, srv.URL)

	p.Navigate("/ui/#/")
	p.WaitText("#page-info", "1–100 of 10000", 5*time.Second)
	t.Logf("first render: pool rows at %v, map points at %v", p.RenderTime("table#records tr.pool-row", time.Second), p.RenderTime("svg#map circle.point", time.Second))
	if n := p.Count("table#records tr.pool-row[data-record][data-pool]"); n < 200 || n > 300 {
		t.Errorf("overview: %d pool rows, want those of 100 records (2-3 pools each)", n)
	}
	row := `table#records tr.pool-row[data-record="shop.example.com."]`
	for sel, want := range map[string]string{
		row + `[data-pool="mumbai"] td.state.state-down`:         "down",
		row + `[data-pool="frankfurt"] td.share-5m`:              "62.1 %",
		row + `[data-pool="frankfurt"] td.share-1h`:              "65.6 %",
		row + `[data-pool="mumbai"] td.no-traffic`:               "down: https 203.0.113.10:443: connect: connection refused",
		row + `[data-pool="mumbai"] td.reason`:                   "https 203.0.113.10:443: connect: connection refused",
		`tr.pool-row[data-pool="sydney"] td.drain`:               "drain safe",
		`a[href="#/record/shop.example.com."]`:                   "shop.example.com.",
		`a[href="#/record/shop.example.com./pool/mumbai"]`:       "mumbai",
		`svg#map circle.point[data-kind=pool][data-state=down]`:  "",
		`svg#map circle.point[data-kind=node][data-state=stale]`: "",
	} {
		got := p.Texts(sel)
		if len(got) == 0 || !strings.Contains(got[0], want) {
			t.Errorf("overview: %s = %q, want %q", sel, got, want)
		}
	}
	for sel, re := range map[string]string{
		row + `[data-pool="mumbai"] td.since`:   `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(3 m ago\)$`,
		row + `[data-pool="virginia"] td.drain`: `^draining \(last answer \d+ s ago\)$`,
		`span#updated`:                          `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`,
	} {
		got := p.Texts(sel)
		if len(got) != 1 || !regexp.MustCompile(re).MatchString(got[0]) {
			t.Errorf("overview: %s = %q, want %s", sel, got, re)
		}
	}
	if n := p.Count(`svg#map path.land`); n != 1 {
		t.Errorf("map: %d land paths", n)
	}
	if got := uitest.Eval[string](p, `document.querySelector('svg#map circle.point[data-state=down] title').textContent`); !strings.Contains(got, "down") {
		t.Errorf("a down point's title %q has no state word", got)
	}

	// Live: focus a link, flip mumbai up, and the row says so within 2 s
	// with the focus where it was.
	p.Eval(`(() => { const a = document.querySelector('a[href="#/record/shop.example.com./pool/frankfurt"]'); window.__marked = a; a.focus(); })()`)
	f.flip()
	took := p.WaitText(row+`[data-pool="mumbai"] td.state`, "up", 2*time.Second)
	t.Logf("a health change showed after %v", took)
	if !uitest.Eval[bool](p, `document.activeElement === window.__marked && window.__marked.isConnected`) {
		t.Errorf("the refresh lost the focused link: focus is on %s", uitest.Eval[string](p, `document.activeElement.outerHTML.slice(0, 120)`))
	}

	// The filter, kept across a refresh; "/" focuses it.
	p.Eval(`document.body.focus(); document.dispatchEvent(new KeyboardEvent('keydown', {key: '/', bubbles: true}))`)
	if id := uitest.Eval[string](p, `document.activeElement.id`); id != "filter" {
		t.Errorf(`"/" focused %q, not the filter`, id)
	}
	p.Eval(`(() => { const f = document.getElementById('filter'); f.value = 'r0999'; f.dispatchEvent(new Event('input')); })()`)
	p.WaitText("#page-info", "1–10 of 10", 3*time.Second)
	f.flip()
	time.Sleep(500 * time.Millisecond)
	if got := p.Texts("#page-info"); len(got) != 1 || got[0] != "1–10 of 10" || uitest.Eval[string](p, `document.getElementById('filter').value`) != "r0999" {
		t.Errorf("after a refresh the filter shows %q", got)
	}
	if !strings.Contains(p.Location(), "q=r0999") {
		t.Errorf("the filter is not in the hash: %s", p.Location())
	}

	// Paging 10,000 records.
	p.Eval(`(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()`)
	p.WaitText("#page-info", "1–100 of 10000", 3*time.Second)
	start := time.Now()
	p.Eval(`document.getElementById('page-next').click()`)
	p.WaitText("#page-info", "101–200 of 10000", 3*time.Second)
	t.Logf("next page of 10,000 records drawn in %v", time.Since(start))
	if got := p.Texts(`table#records tbody.record th.record a`); len(got) != 100 || got[0] != "r00100.example.net." {
		t.Errorf("page 2 starts with %q (%d records)", got[:min(1, len(got))], len(got))
	}
	if uitest.Eval[bool](p, `document.getElementById('page-prev').disabled`) {
		t.Error("page 2: previous is disabled")
	}
	p.Eval(`(() => { const s = document.getElementById('state-filter'); s.value = 'down'; s.dispatchEvent(new Event('change')); })()`)
	p.WaitFor(3*time.Second, "the down filter", `/^1–100 of \d+$/.test(document.getElementById('page-info').textContent) && !document.getElementById('page-info').textContent.endsWith(' 10000')`)
	if n := p.Count(`table#records tbody.record`); n != 100 || p.Count(`table#records tbody.record:not(:has(td.state-down))`) != 0 {
		t.Errorf("state filter down: %d records, some without a down pool", n)
	}

	// j/k move between rows; Enter opens the pool's page.
	p.Eval(`document.activeElement.blur(); document.dispatchEvent(new KeyboardEvent('keydown', {key: 'j', bubbles: true}))`)
	first := uitest.Eval[string](p, `document.activeElement.dataset.record + '/' + document.activeElement.dataset.pool`)
	p.Eval(`document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'j', bubbles: true}))`)
	second := uitest.Eval[string](p, `document.activeElement.dataset.record + '/' + document.activeElement.dataset.pool`)
	if first == second || !strings.Contains(first, "/") || strings.Contains(first, "undefined") {
		t.Errorf("j moved focus from %q to %q", first, second)
	}
	p.Eval(`document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))`)
	rec, pool, _ := strings.Cut(second, "/")
	p.WaitFor(3*time.Second, "the pool's page", fmt.Sprintf(`location.hash === '#/record/%s/pool/%s' && !!document.querySelector('tr.pool-row.selected')`, rec, pool))

	// The record page, deep-linked to a pool.
	p.Hash("#/record/shop.example.com./pool/virginia")
	p.WaitFor(3*time.Second, "the record page", `!!document.querySelector('tr.pool-row.selected[data-pool="virginia"]')`)
	for sel, want := range map[string]string{
		`pre#record-config`: "records:",
		`.config-where`:     "examples/larkbook/steer.yaml:42",
		`table#rules tr.rule-row[data-rule="2"][data-depth="1"] td.match`: "pool mumbai down",
		`table#rules tr.rule-row[data-rule="1"] td.rule-share`:            "24.0 %",
		`ul#widened li`:          "49.36.0.0/16 from /24: pool mumbai down",
		`table#latency tbody tr`: "mumbai 18ms",
	} {
		got := p.Texts(sel)
		if len(got) == 0 || !strings.Contains(got[0], want) {
			t.Errorf("record page: %s = %q, want %q", sel, got, want)
		}
	}
	if p.Count(`svg#scope-chart.chart rect.bin.hatched`) < 3 || p.Count(`svg#scope-chart.chart rect.bin:not(.hatched)`) < 9 {
		t.Errorf("scope chart: %d hatched and %d plain bars", p.Count(`svg#scope-chart rect.bin.hatched`), p.Count(`svg#scope-chart rect.bin:not(.hatched)`))
	}
	if uitest.Eval[string](p, `document.activeElement.dataset.pool`) != "virginia" {
		t.Error("the deep-linked pool's row is not focused")
	}
	dir := uitest.ArtifactDir(t)
	p.Screenshot(dir, "record.png", "")
	p.Screenshot(dir, "scope-chart.png", "svg#scope-chart")
	p.Hash("#/")
	p.WaitFor(3*time.Second, "the overview", `!!document.querySelector('svg#map circle.point')`)
	p.Screenshot(dir, "map.png", "svg#map")
}
