// Package uitest drives the dashboard (internal/ui) in a headless Chromium
// through the DevTools protocol (chromedp), for the tests that run a real
// steer serve process on loopback and look at its pages as an operator's
// browser shows them.
//
// One Browser per test binary is enough: each Page is its own tab.
// Screenshots go to $STEER_ARTIFACTS when set (CI keeps them), else to the
// test's temporary directory.
package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Chromium is where Debian's chromium package puts the browser.
const Chromium = "/usr/bin/chromium"

// StartTimeout bounds the browser's start (its first blank tab).
const StartTimeout = 30 * time.Second

// FindChromium returns the browser's path, or "" when none is installed:
// $STEER_CHROMIUM, /usr/bin/chromium, or chromium / chromium-browser /
// google-chrome on PATH.
func FindChromium() string {
	if p := os.Getenv("STEER_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat(Chromium); err == nil {
		return Chromium
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// NeedChromium skips the test when no browser is installed, or fails it
// when STEER_REQUIRE_TOOLS=1 (the test script sets it, and installs the
// chromium package).
func NeedChromium(t testing.TB) string {
	t.Helper()
	p := FindChromium()
	if p == "" {
		if os.Getenv("STEER_REQUIRE_TOOLS") == "1" {
			t.Fatal("chromium is not installed (apt: chromium; the test script installs it)")
		}
		t.Skip("chromium is not installed (apt: chromium)")
	}
	return p
}

// Browser is one headless Chromium with a fresh profile.
type Browser struct {
	ctx    context.Context // the browser's first tab: its context owns the process
	cancel func()
	pid    int
	out    *lockedBuffer
}

// Options adjust the browser.
type Options struct {
	Width, Height int // the window; default 1280 × 900
}

// Start runs a headless Chromium (skipping or failing as NeedChromium
// says when there is none) and stops it at the test's cleanup: its
// contexts are cancelled, then its process group is killed by PID so no
// renderer outlives the test.
func Start(t testing.TB, o Options) *Browser {
	t.Helper()
	b, err := StartBrowser(NeedChromium(t), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// StartBrowser is Start for programs (bench/ui-screenshot): exec is the
// browser, profile an empty directory for its profile. Close stops it.
func StartBrowser(execPath, profile string, o Options) (*Browser, error) {
	if o.Width == 0 {
		o.Width, o.Height = 1280, 900
	}
	out := &lockedBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.DisableGPU,
		chromedp.CombinedOutput(out),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Its own process group, so Close can kill every child by
			// the browser's PID; and, on Linux, gone with the test
			// binary (procattr_*.go).
			cmd.SysProcAttr = browserProcAttr()
		}),
	)
	if os.Getuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{ctx: ctx, out: out, cancel: func() { cancel(); acancel() }}
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.Navigate("about:blank")) }()
	select {
	case err := <-started:
		if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			b.pid = c.Browser.Process().Pid
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("chromium did not start: %v\n%s", err, out.String())
		}
	case <-time.After(StartTimeout):
		b.Close()
		return nil, fmt.Errorf("chromium did not start within %v\n%s", StartTimeout, out.String())
	}
	return b, nil
}

// PID is the browser's process id.
func (b *Browser) PID() int { return b.pid }

// Close stops the browser: its contexts, then its process group by PID.
func (b *Browser) Close() {
	done := make(chan struct{})
	go func() { b.cancel(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	if b.pid > 0 {
		syscall.Kill(-b.pid, syscall.SIGKILL)
		syscall.Kill(b.pid, syscall.SIGKILL)
	}
}

// Page is one tab of the browser on the dashboard at Base
// (http://127.0.0.1:PORT).
type Page struct {
	t      testing.TB
	ctx    context.Context
	Base   string
	mu     sync.Mutex
	bytes  float64 // transferred since the last ResetWeight
	reqs   int
	failed []string
	bad    []string // responses with status >= 400 ("403 http://...")
	// pending are the requests sent and not yet answered (not even the
	// headers), with when they were sent.
	pending map[network.RequestID]string
}

// renderProbe records, from the page's first script on, when each
// selector of window.__uitestWatch first matches (performance.now(): ms
// since navigation start).
const renderProbe = `(() => {
  const marks = {};
  window.__uitestMarks = marks;
  const sels = ['table#records tr.pool-row', 'svg#map circle.point', 'form#login', 'pre#explain-answer',
                'table#nodes tr[data-node]', 'svg.chart', '#main > *'];
  const look = () => {
    for (const s of sels) if (!(s in marks) && document.querySelector(s)) marks[s] = performance.now();
  };
  new MutationObserver(look).observe(document, { childList: true, subtree: true });
})();`

// NewPage opens a tab on base, in a browser context of its own (its own
// cookies), which stays open until the test ends.
func (b *Browser) NewPage(t testing.TB, base string) *Page {
	t.Helper()
	p, err := b.OpenPage(base)
	if err != nil {
		t.Fatal(err)
	}
	p.t = t
	t.Cleanup(p.Close)
	return p
}

// OpenPage is NewPage for programs; Close it when done. Its helpers that
// fail a test panic instead when it has none.
func (b *Browser) OpenPage(base string) (*Page, error) {
	// Its own browser context: cookies ignore the port, so pages on two
	// steer processes of one host would otherwise share (and replace)
	// one session cookie.
	ctx, _ := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	p := &Page{ctx: ctx, Base: strings.TrimRight(base, "/")}
	// The tab exists once something runs on it.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: renderProbe})
		return err
	})); err != nil {
		return nil, err
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventLoadingFinished:
			p.mu.Lock()
			p.bytes += e.EncodedDataLength
			p.reqs++
			p.mu.Unlock()
		case *network.EventRequestWillBeSent:
			p.mu.Lock()
			if p.pending == nil {
				p.pending = map[network.RequestID]string{}
			}
			p.pending[e.RequestID] = time.Now().Format("15:04:05.000") + " " + e.Request.Method + " " + e.Request.URL
			p.mu.Unlock()
		case *network.EventResponseReceived:
			p.mu.Lock()
			delete(p.pending, e.RequestID)
			p.mu.Unlock()
			if e.Response != nil && e.Response.Status >= 400 {
				p.mu.Lock()
				if len(p.bad) < 50 {
					p.bad = append(p.bad, fmt.Sprintf("%d %s", e.Response.Status, e.Response.URL))
				}
				p.mu.Unlock()
			}
		case *network.EventLoadingFailed:
			p.mu.Lock()
			delete(p.pending, e.RequestID)
			p.failed = append(p.failed, e.ErrorText)
			p.mu.Unlock()
		}
	})
	return p, err
}

// BadResponses are the page's responses with a status of 400 or more so
// far ("403 http://127.0.0.1:PORT/ui/"), for failure messages.
func (p *Page) BadResponses() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bad...)
}

// Pending are the requests the page sent that have no response yet
// ("15:04:05.000 GET http://..."), for failure messages.
func (p *Page) Pending() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.pending {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Close closes the tab.
func (p *Page) Close() { chromedp.Cancel(p.ctx) }

func (p *Page) fatalf(format string, args ...any) {
	if p.t != nil {
		p.t.Helper()
		p.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

func (p *Page) logf(format string, args ...any) {
	if p.t != nil {
		p.t.Helper()
		p.t.Logf(format, args...)
	}
}

// Within runs a with a timeout.
func (p *Page) do(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// Navigate loads path (relative to Base, or a full URL) and waits for its
// load event, at most 10 s.
func (p *Page) Navigate(path string) {
	if p.t != nil {
		p.t.Helper()
	}
	u := path
	if !strings.Contains(path, "://") {
		u = p.Base + path
	}
	if err := p.do(10*time.Second, chromedp.Navigate(u)); err != nil {
		p.fatalf("navigate to %s: %v", u, err)
	}
}

// Hash sets location.hash (a route of the dashboard) without a reload.
func (p *Page) Hash(h string) {
	if p.t != nil {
		p.t.Helper()
	}
	p.Eval(fmt.Sprintf("location.hash = %q", h))
}

// Eval evaluates the JavaScript expression (awaiting a promise) and
// decodes its value into T.
func Eval[T any](p *Page, js string) T {
	if p.t != nil {
		p.t.Helper()
	}
	v, err := p.eval(js, nil)
	if err != nil {
		p.fatalf("%s: %v", js, err)
	}
	var out T
	if err := jsonUnmarshal(v, &out); err != nil {
		p.fatalf("%s: decoding %s: %v", js, v, err)
	}
	return out
}

// Eval is Eval[any] without a result.
func (p *Page) Eval(js string) {
	if p.t != nil {
		p.t.Helper()
	}
	if _, err := p.eval(js, nil); err != nil {
		p.fatalf("%s: %v\npage: %s; responses >= 400: %q", js, err, p.Location(), p.BadResponses())
	}
}

func (p *Page) eval(js string, _ any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
}

// Login submits the login form with token, as an operator types it, and
// waits until the browser is on /ui/ (10 s).
func (p *Page) Login(token string) {
	if p.t != nil {
		p.t.Helper()
	}
	p.Navigate("/ui/login")
	if err := p.do(10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`form#login input#token[type=password][name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input#token`), token),
		chromedp.Click(chromedp.CSS(`form#login button[type=submit]`)),
	); err != nil {
		p.fatalf("login form: %v\n%s", err, p.HTML())
	}
	p.WaitFor(10*time.Second, "the dashboard after login", `location.pathname === '/ui/' && !!document.getElementById('main')`)
}

// Keys types keys into whatever has the focus, as a keyboard does (key
// down, char, key up per rune; "\r" is Enter, "\t" Tab, "\u001b" Escape:
// see chromedp's kb package).
func (p *Page) Keys(keys string) {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.do(10*time.Second, chromedp.KeyEvent(keys)); err != nil {
		p.fatalf("keys %q: %v", keys, err)
	}
}

// ColorScheme makes the page see prefers-color-scheme: scheme ("dark",
// "light"; "" drops the override).
func (p *Page) ColorScheme(scheme string) {
	if p.t != nil {
		p.t.Helper()
	}
	params := emulation.SetEmulatedMediaParams{}
	if scheme != "" {
		params.Features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, params); err != nil {
		p.fatalf("color scheme %q: %v", scheme, err)
	}
}

// Shortcut presses one key (key as KeyboardEvent.key says it, code as
// KeyboardEvent.code) with no character typed: a raw key down and up, as
// a page's keyboard shortcut sees it whatever has the focus. (Keys sends
// the character too, which the protocol types even when the page's
// keydown handler prevents the default.)
func (p *Page) Shortcut(key, code string, keyCode int64) {
	if p.t != nil {
		p.t.Helper()
	}
	err := p.do(10*time.Second, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, input.DispatchKeyEventParams{
				Type: typ, Key: key, Code: code, WindowsVirtualKeyCode: keyCode, NativeVirtualKeyCode: keyCode}); err != nil {
				return err
			}
		}
		return nil
	}))
	if err != nil {
		p.fatalf("key %q: %v", key, err)
	}
}

// WaitFor polls the JavaScript condition (every 25 ms) until it is true,
// failing the test after timeout; it returns how long it took.
func (p *Page) WaitFor(timeout time.Duration, what, cond string) time.Duration {
	if p.t != nil {
		p.t.Helper()
	}
	start := time.Now()
	var last error
	for time.Since(start) < timeout {
		v, err := p.eval("!!("+cond+")", nil)
		if err == nil && string(v) == "true" {
			return time.Since(start)
		}
		last = err
		time.Sleep(25 * time.Millisecond)
	}
	p.fatalf("%s: not within %v (%s; last error %v)\npage: %s; responses >= 400: %q; unanswered requests: %q", what, timeout, cond, last, p.Location(), p.BadResponses(), p.Pending())
	return 0
}

// WaitText waits until an element matching selector contains text (its
// textContent), and returns how long it took.
func (p *Page) WaitText(selector, text string, timeout time.Duration) time.Duration {
	if p.t != nil {
		p.t.Helper()
	}
	start := time.Now()
	cond := fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).some((e) => e.textContent.includes(%q))`, selector, text)
	for time.Since(start) < timeout {
		v, err := p.eval(cond, nil)
		if err == nil && string(v) == "true" {
			return time.Since(start)
		}
		time.Sleep(25 * time.Millisecond)
	}
	p.fatalf("no %s containing %q within %v; they say: %q\npage %s; responses >= 400: %q; unanswered requests: %q", selector, text, timeout, p.Texts(selector), p.Location(), p.BadResponses(), p.Pending())
	return 0
}

// Texts are the trimmed textContent of every element matching selector.
func (p *Page) Texts(selector string) []string {
	v, err := p.eval(fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map((e) => e.textContent.trim())`, selector), nil)
	if err != nil {
		return []string{"(error: " + err.Error() + ")"}
	}
	var out []string
	jsonUnmarshal(v, &out)
	return out
}

// Count is how many elements match selector.
func (p *Page) Count(selector string) int {
	v, err := p.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), nil)
	if err != nil {
		return -1
	}
	var n int
	jsonUnmarshal(v, &n)
	return n
}

// Location is the page's URL.
func (p *Page) Location() string {
	v, _ := p.eval(`location.href`, nil)
	return string(v)
}

// HTML is the document's markup (for failure messages), cut at 4 KB.
func (p *Page) HTML() string {
	v, _ := p.eval(`document.documentElement.outerHTML`, nil)
	var s string
	jsonUnmarshal(v, &s)
	if len(s) > 4096 {
		s = s[:4096] + "..."
	}
	return s
}

// ResetWeight starts counting transferred bytes again (call it before the
// navigation whose weight is wanted).
func (p *Page) ResetWeight() {
	p.mu.Lock()
	p.bytes, p.reqs, p.failed = 0, 0, nil
	p.mu.Unlock()
}

// DisableCache turns the tab's HTTP cache off (on), so a navigation's
// weight counts every asset as a first visit does.
func (p *Page) DisableCache(off bool) {
	if p.t != nil {
		p.t.Helper()
	}
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: off}); err != nil {
		p.fatalf("cache: %v", err)
	}
}

// Timed runs action (JavaScript statements) in the page and waits there,
// checking every 5 ms, until cond is true; it returns the time between,
// as the page's clock measures it (no protocol round trips in it), and
// fails after timeout.
func (p *Page) Timed(what, action, cond string, timeout time.Duration) time.Duration {
	if p.t != nil {
		p.t.Helper()
	}
	js := fmt.Sprintf(`(async () => { const t0 = performance.now(); %s;
  while (!(%s)) { if (performance.now() - t0 > %d) return -1; await new Promise((r) => setTimeout(r, 5)); }
  return performance.now() - t0; })()`, action, cond, timeout.Milliseconds())
	ctx, cancel := context.WithTimeout(p.ctx, timeout+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js, chromedp.EvalAwaitPromise))
	if err != nil || v < 0 {
		p.fatalf("%s: not within %v (%s; error %v)\npage: %s; responses >= 400: %q", what, timeout, cond, err, p.Location(), p.BadResponses())
	}
	return time.Duration(v * float64(time.Millisecond))
}

// Weight is the bytes transferred (headers and bodies as received, from
// the Network domain's loadingFinished events) since ResetWeight, and how
// many requests finished. A streaming response (/v1/events) is not
// finished and not counted.
func (p *Page) Weight() (bytes int64, requests int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.bytes), p.reqs
}

// RenderTime is when selector first matched after the last navigation,
// measured in the page from navigation start (performance.now() when a
// mutation first made it match); selector must be one renderProbe
// watches. It waits up to timeout for it.
func (p *Page) RenderTime(selector string, timeout time.Duration) time.Duration {
	if p.t != nil {
		p.t.Helper()
	}
	p.WaitFor(timeout, "a first render of "+selector, fmt.Sprintf(`window.__uitestMarks && (%q in window.__uitestMarks)`, selector))
	ms := Eval[float64](p, fmt.Sprintf(`window.__uitestMarks[%q]`, selector))
	return time.Duration(ms * float64(time.Millisecond))
}

// Cookies are the browser's cookies for Base.
func (p *Page) Cookies() []*network.Cookie {
	if p.t != nil {
		p.t.Helper()
	}
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	r, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{p.Base + "/ui/"}})
	if err != nil {
		p.fatalf("cookies: %v", err)
	}
	return r.Cookies
}

// ArtifactDir is where screenshots go: $STEER_ARTIFACTS (created), else
// the test's temporary directory.
func ArtifactDir(t testing.TB) string {
	if d := os.Getenv("STEER_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// Screenshot writes a PNG of the element matching selector ("" for the
// viewport) to dir/name and checks it is a picture, not a blank: at least
// minBytes long, and its sampled pixels of at least minColours distinct
// colours with no one colour covering more than 99 % of them. It returns
// the file's path and the image.
func (p *Page) Screenshot(dir, name, selector string) string {
	if p.t != nil {
		p.t.Helper()
	}
	path := filepath.Join(dir, name)
	png, err := p.CaptureScreenshot(selector)
	if err != nil {
		p.fatalf("screenshot of %q: %v", selector, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.fatalf("%v", err)
	}
	if err := CheckPicture(png, 2000, 3); err != nil {
		p.fatalf("screenshot %s of %q: %v", path, selector, err)
	}
	p.logf("screenshot %s: %d bytes", path, len(png))
	return path
}

// CaptureScreenshot is a PNG of the element matching selector, or of the
// viewport when selector is "".
func (p *Page) CaptureScreenshot(selector string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if selector == "" {
		return chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			r, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
			if err != nil {
				return nil, err
			}
			return r.Data, nil
		})
	}
	return chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(selector)))
}

// CheckPicture says why b is not a non-blank PNG: shorter than minBytes,
// not a PNG, or its pixels sampled on a 48 × 48 grid have fewer than
// minColours distinct colours or one colour covers more than 99 % of them.
func CheckPicture(b []byte, minBytes, minColours int) error {
	if len(b) < minBytes {
		return fmt.Errorf("%d bytes, want at least %d", len(b), minBytes)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a PNG: %v", err)
	}
	r := img.Bounds()
	if r.Dx() < 32 || r.Dy() < 32 {
		return fmt.Errorf("%d × %d pixels", r.Dx(), r.Dy())
	}
	counts := map[[3]uint32]int{}
	n := 0
	for i := range 48 {
		for j := range 48 {
			x := r.Min.X + (2*i+1)*r.Dx()/96
			y := r.Min.Y + (2*j+1)*r.Dy()/96
			c := colourAt(img, x, y)
			counts[c]++
			n++
		}
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	if len(counts) < minColours {
		return fmt.Errorf("%d distinct colours in %d sampled pixels, want at least %d: blank?", len(counts), n, minColours)
	}
	if most*100 > n*99 {
		return fmt.Errorf("one colour covers %d of %d sampled pixels: blank?", most, n)
	}
	return nil
}

// Background is the most common colour of a PNG's pixels sampled on a
// 48 × 48 grid (r, g, b in 0..255), and its luminance (0..255).
func Background(b []byte) (rgb [3]uint32, luminance float64, err error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return rgb, 0, err
	}
	r := img.Bounds()
	counts := map[[3]uint32]int{}
	for i := range 48 {
		for j := range 48 {
			counts[colourAt(img, r.Min.X+(2*i+1)*r.Dx()/96, r.Min.Y+(2*j+1)*r.Dy()/96)]++
		}
	}
	most := 0
	for c, n := range counts {
		if n > most {
			most, rgb = n, c
		}
	}
	return rgb, 0.2126*float64(rgb[0]) + 0.7152*float64(rgb[1]) + 0.0722*float64(rgb[2]), nil
}

func colourAt(img image.Image, x, y int) [3]uint32 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint32{r >> 8, g >> 8, b >> 8}
}

// Fetch runs fetch(path, init) in the page (its origin, its cookies) and
// returns the status and the body's text. init is a JavaScript object
// literal ("{method: 'PUT', body: '...'}"), "" for a GET.
func (p *Page) Fetch(path, init string) (int, string) {
	if p.t != nil {
		p.t.Helper()
	}
	if init == "" {
		init = "{}"
	}
	var r struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	r = Eval[struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}](p, fmt.Sprintf(`(async () => { const r = await fetch(%q, Object.assign({credentials: 'same-origin'}, %s)); return {status: r.status, body: await r.text()}; })()`, path, init))
	return r.Status, r.Body
}

// Origin is Base's scheme and host.
func (p *Page) Origin() string {
	u, err := url.Parse(p.Base)
	if err != nil {
		return p.Base
	}
	return u.Scheme + "://" + u.Host
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // keep the start: why it failed to start
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("undefined")
	}
	return json.Unmarshal(b, v)
}
