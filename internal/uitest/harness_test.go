package uitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHarness checks the helpers against a small page served here: text
// appearing late is waited for, the render probe times it, the weight
// counts the bytes sent, and a blank screenshot is refused where a drawn
// one passes.
func TestHarness(t *testing.T) {
	big := strings.Repeat("x", 50_000)
	mux := http.NewServeMux()
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><body style="background:#fff"><main id="main"></main>
<div id="blank" style="width:200px;height:100px;background:#fff"></div>
<script>
setTimeout(() => {
  document.getElementById('main').innerHTML = '<table id="records"><tr class="pool-row"><td class="state">up</td></tr></table>' +
    '<svg id="map" class="chart" width="300" height="150"><rect width="300" height="150" fill="#ddeeff"/><circle class="point" cx="50" cy="50" r="20" fill="red"/><circle cx="150" cy="80" r="30" fill="green"/></svg>';
  fetch('/big').then((r) => r.text());
}, 150);
</script></body></html>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, big) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	b := browser(t)
	p := b.NewPage(t, srv.URL)
	p.ResetWeight()
	p.Navigate("/ui/")
	took := p.WaitText("table#records td.state", "up", 5*time.Second)
	render := p.RenderTime("table#records tr.pool-row", time.Second)
	if render < 150*time.Millisecond || render > 3*time.Second {
		t.Errorf("render time %v; the page draws after 150 ms", render)
	}
	t.Logf("waited %v, render at %v from navigation start", took, render)
	p.WaitFor(5*time.Second, "the big fetch counted", "performance.getEntriesByName(location.origin + '/big').length > 0")
	time.Sleep(100 * time.Millisecond)
	bytes, reqs := p.Weight()
	if bytes < 50_000 || bytes > 60_000 || reqs < 2 {
		t.Errorf("weight %d bytes in %d requests; want the 50 kB body and the page", bytes, reqs)
	}
	dir := t.TempDir()
	p.Screenshot(dir, "map.png", "svg#map")
	p.Screenshot(dir, "page.png", "")
	png, err := p.CaptureScreenshot("#blank")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPicture(png, 100, 3); err == nil {
		t.Error("a blank element passed the picture check")
	}
	if got := p.Texts("td.state"); len(got) != 1 || got[0] != "up" {
		t.Errorf("Texts: %q", got)
	}
	if n := Eval[int](p, `Promise.resolve(41 + 1)`); n != 42 {
		t.Errorf("Eval with a promise: %d", n)
	}
	code, body := p.Fetch("/big", "")
	if code != 200 || len(body) != len(big) {
		t.Errorf("Fetch: %d, %d bytes", code, len(body))
	}
}
