package ui_test

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/uitest"
)

// TestToolsPages renders the explain, change-preview and fleet pages from
// the fixture API in headless Chromium and checks what the browser tests
// of a real node cannot reach: the fleet table's cells (stale and missing
// observations), explain's node choice and its 400, the preview's
// chart, the pool state PUT with its CSRF token for 204 and 202, weights
// answered with YAML, and the pages off a fleet and without simulate.
func TestToolsPages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	f := &toolsFixture{simulate: 200}
	srv := httptest.NewServer(f.handler(t, ovAssets()))
	t.Cleanup(srv.Close)
	b := uitest.Start(t, uitest.Options{})
	p := b.NewPage(t, srv.URL)
	text := func(sel string) string {
		t.Helper()
		got := p.Texts(sel)
		if len(got) != 1 {
			t.Errorf("%s: %d elements (%q), want 1", sel, len(got), got)
			return ""
		}
		return got[0]
	}

	// Fleet.
	p.Navigate("/ui/#/fleet")
	p.WaitFor(5*time.Second, "the fleet's nodes", `document.querySelectorAll('table#nodes tr[data-node]').length === 3`)
	iad := `table#nodes tr[data-node="iad-1"]`
	if got := text(iad + " .digest"); got != "1b0e77aa29c4" {
		t.Errorf("iad-1 digest %q, want the first 12 hex digits", got)
	}
	if got := uitest.Eval[string](p, `document.querySelector('table#nodes tr[data-node="iad-1"] .digest').title`); !strings.HasPrefix(got, "sha256:1b0e77aa29c4d5e6") {
		t.Errorf("iad-1 digest title %q, want the full digest", got)
	}
	if got := text(iad + " .view-age"); !regexp.MustCompile(`^1 m ago$`).MatchString(got) {
		t.Errorf("iad-1 view age %q, want 1 m ago", got)
	}
	if got := text(iad + " .health-mode"); !strings.HasPrefix(got, "frozen since") {
		t.Errorf("iad-1 health mode %q", got)
	}
	if got := text(iad + " .error"); !strings.Contains(got, "checksum mismatch") || !strings.Contains(got, "view older than 60s") {
		t.Errorf("iad-1 error %q, want the error and the warning", got)
	}
	obs := func(target, node string) string {
		return `table#targets tr[data-target="` + target + `"] td.observer[data-observer="` + node + `"]`
	}
	for sel, want := range map[string]string{
		obs("198.51.100.20:443/https", "fra-1"):                              "down",
		obs("198.51.100.20:443/https", "iad-1"):                              "up",
		obs("203.0.113.10:443/https", "iad-1"):                               "up", // stale: the mark is style, the text the word
		obs("192.0.2.30:80/http", "bom-1"):                                   "",   // no observation
		`table#targets tr[data-target="198.51.100.20:443/https"] td.verdict`: "down",
	} {
		if got := strings.TrimSpace(text(sel)); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	if n := p.Count(obs("203.0.113.10:443/https", "iad-1") + ".stale"); n != 1 {
		t.Errorf("the stale observation is not marked stale")
	}

	// Explain: prefilled from the hash, the answer one RR per line.
	p.Hash("#/explain?name=shop.example.com&subnet=49.36.0.0/24")
	p.WaitFor(5*time.Second, "the explain answer", `document.querySelector('pre#explain-answer')`)
	if got, want := text("pre#explain-answer"), "shop.example.com.\t60\tIN\tA\t203.0.113.10\nshop.example.com.\t60\tIN\tA\t203.0.113.11"; got != want {
		t.Errorf("explain answer %q, want %q", got, want)
	}
	if n := p.Count("div#explain-output ol#explain-steps > li"); n != 1 {
		t.Errorf("%d steps, want 1", n)
	}
	if uitest.Eval[bool](p, `document.querySelector('#explain-node').closest('label').hidden`) {
		t.Errorf("the node selector is hidden in a fleet")
	}
	// Another node: its name goes to the API; a bad subnet: the 400's text.
	p.Eval(`(() => { document.getElementById('explain-node').value = 'bom-1'; document.getElementById('explain-subnet').value = '49.36.0.0/33'; document.getElementById('explain-run').click(); })()`)
	p.WaitText("div#explain-output p.error", `bad ecs prefix "49.36.0.0/33"`, 5*time.Second)
	if r := f.requests("GET"); len(r) == 0 || !strings.Contains(r[len(r)-1].Query, "node=bom-1") {
		t.Errorf("explain as bom-1 asked %+v", r)
	}
	if loc := p.Location(); !strings.Contains(loc, "#/explain?") || !strings.Contains(loc, "node=bom-1") {
		t.Errorf("the result's link %s lacks the query", loc)
	}

	// Preview: a drain, its chart and safe-at, then applied.
	p.Hash("#/preview/shop.example.com.?kind=drain&pool=us-east&run=1")
	p.WaitFor(10*time.Second, "the preview chart", `document.querySelector('svg#preview-chart.chart') && document.querySelector('p#safe-at')`)
	if n := p.Count("svg#preview-chart path.band"); n != 4 {
		t.Errorf("%d bands, want one per pool (4)", n)
	}
	if n := p.Count("svg#preview-chart path.median[data-pool]"); n != 4 {
		t.Errorf("%d median lines, want 4", n)
	}
	dashes := uitest.Eval[[]string](p, `Array.from(document.querySelectorAll('svg#preview-chart path.median')).map((e) => e.getAttribute('stroke-dasharray'))`)
	if len(dashes) == 4 && (dashes[0] == dashes[1] || dashes[1] == dashes[2] || dashes[2] == dashes[3]) {
		t.Errorf("the lines' dash patterns %q do not tell them apart", dashes)
	}
	for _, pool := range []string{"ap-south", "eu-central", "us-east", "us-east-canary"} {
		if !strings.Contains(text("svg#preview-chart"), pool) {
			t.Errorf("the chart does not name %s", pool)
		}
	}
	if got := text("p#safe-at"); !strings.Contains(got, "+1 m after the drain") {
		t.Errorf("safe at %q", got)
	}
	if r := f.requests("POST"); len(r) != 1 || r[0].CSRF != "fixture-csrf" || !strings.Contains(r[0].Body, `"drain":"us-east"`) || !strings.Contains(r[0].Body, `"at":"600s"`) {
		t.Errorf("simulate requests %+v", r)
	}
	p.Eval(`window.confirm = (m) => { window.asked = m; return true; }; document.getElementById('preview-apply').click()`)
	p.WaitText("p#preview-status", "applied: pool us-east of shop.example.com. set to drain", 5*time.Second)
	if got := uitest.Eval[string](p, `window.asked`); !strings.Contains(got, `Drain pool "us-east" of shop.example.com.?`) || !strings.Contains(got, "3 nodes") {
		t.Errorf("the confirmation said %q", got)
	}
	if r := f.requests("PUT"); len(r) != 1 || r[0].Path != "/v1/records/shop.example.com./pools/us-east/state" || r[0].CSRF != "fixture-csrf" || r[0].Body != `{"state":"drain"}` {
		t.Errorf("PUT requests %+v", r)
	}
	// Down, pending in the fleet (202); cancelled confirmations send nothing.
	p.Eval(`(() => { const k = document.getElementById('preview-kind'); k.value = 'down'; k.dispatchEvent(new Event('change'));
  const s = document.getElementById('preview-pool'); s.value = 'us-east-canary'; s.dispatchEvent(new Event('change'));
  window.confirm = () => false; document.getElementById('preview-apply').click(); })()`)
	p.WaitText("p#preview-status", "Not applied (cancelled).", 5*time.Second)
	p.Eval(`window.confirm = () => true; document.getElementById('preview-apply').click()`)
	p.WaitText("p#preview-status", "applied on this node; pending fleet: fleet (the store is unreachable)", 5*time.Second)
	if r := f.requests("PUT"); len(r) != 2 || r[1].Body != `{"state":"down"}` {
		t.Errorf("PUT requests %+v", r)
	}
	// A weight: the YAML to write, and no apply.
	p.Eval(`(() => { const k = document.getElementById('preview-kind'); k.value = 'weight'; k.dispatchEvent(new Event('change'));
  const w = document.getElementById('preview-weight'); w.value = '50'; w.dispatchEvent(new Event('input')); })()`)
	p.WaitText("pre#preview-yaml", "{ pool: us-east-canary, weight: 50 }", 5*time.Second)
	if got := text("pre#preview-yaml"); !strings.Contains(got, "{ pool: us-east, weight: 95 }") {
		t.Errorf("weight YAML %q lacks the split's other pool", got)
	}
	if !uitest.Eval[bool](p, `document.getElementById('preview-apply').disabled`) {
		t.Errorf("a weight change can be applied")
	}

	// Off a fleet, without simulate.
	g := &toolsFixture{noFleet: true}
	srv2 := httptest.NewServer(g.handler(t, ovAssets()))
	t.Cleanup(srv2.Close)
	q := b.NewPage(t, srv2.URL)
	q.Navigate("/ui/#/fleet")
	q.WaitText("#main", "This node is not in a fleet", 5*time.Second)
	q.Hash("#/explain?name=shop.example.com")
	q.WaitFor(5*time.Second, "the explain answer", `document.querySelector('pre#explain-answer')`)
	if !uitest.Eval[bool](q, `document.querySelector('#explain-node').closest('label').hidden`) {
		t.Errorf("the node selector shows off a fleet")
	}
	q.Hash("#/preview?record=shop.example.com.&kind=drain&pool=us-east&run=1")
	q.WaitText("p#preview-progress", "Simulation is unavailable on this node (404)", 5*time.Second)
	if n := q.Count("svg#preview-chart"); n != 0 {
		t.Errorf("a chart without a simulation")
	}
}
