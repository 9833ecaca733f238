package simulate

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var outputFiles = []string{
	"share.csv", "sites.csv", "bins.csv", "deviation.csv", "drains.csv", "cost.csv", "result.json",
	"share.png", "share.svg", "cost.png", "cost.svg", "entries.png", "entries.svg",
}

func readOutputCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	// A file left from an earlier run, unreadable to others: Write
	// overwrites it and makes it 0644.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cost.csv"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := canaryResult()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, name := range outputFiles {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 || st.Size() == 0 {
			t.Errorf("%s: mode %v size %d, want 0644 and data", name, st.Mode().Perm(), st.Size())
		}
	}

	share := readOutputCSV(t, filepath.Join(dir, "share.csv"))
	wantHead := "bin_start_s,bin_start,pool,share_p5,share_p50,share_p95,share_mean,configured"
	if got := strings.Join(share[0], ","); got != wantHead {
		t.Errorf("share.csv header %q, want %q", got, wantHead)
	}
	if len(share) != 1+1440*2 {
		t.Fatalf("share.csv has %d rows, want %d", len(share), 1+1440*2)
	}
	// Bin 305 (05:05) is the canary's spike: p95 24 %, configured 5 %.
	row := share[1+305*2+1]
	if want := []string{"18300.000", "05:05:00", "us-east-canary"}; !sameStrings(row[:3], want) {
		t.Errorf("share.csv bin 305 row %q, want it to start with %q", row, want)
	}
	if row[5] != "24.0000" || row[7] != "5.0000" {
		t.Errorf("share.csv bin 305: p95 %q configured %q, want 24.0000 and 5.0000 (percent)", row[5], row[7])
	}
	if last := share[len(share)-1]; last[1] != "23:59:00" || last[7] != "0.0000" {
		t.Errorf("share.csv last row %q: want 23:59:00 and a drained canary", last)
	}

	sites := readOutputCSV(t, filepath.Join(dir, "sites.csv"))
	if got := strings.Join(sites[0], ","); got != "bin_start_s,bin_start,site,pool,share" {
		t.Errorf("sites.csv header %q", got)
	}
	if len(sites) != 1+1440*2*2 {
		t.Errorf("sites.csv has %d rows, want %d", len(sites), 1+1440*2*2)
	}

	cost := readOutputCSV(t, filepath.Join(dir, "cost.csv"))
	if got := strings.Join(cost[0], ","); got != "phase,site,auth_qps,cache_entries,user_qps,ecs,no_ecs_auth_qps,no_ecs_entries,scoped_auth_qps,scoped_entries,per_prefix_auth_qps,per_prefix_entries" {
		t.Errorf("cost.csv header %q", got)
	}
	if want := []string{"start", "bigpublic-us", "0.016667", "1.000", "200.0000"}; len(cost) != 5 || !sameStrings(cost[1][:5], want) {
		t.Errorf("cost.csv %q, want 4 rows after the header, the first %q", cost, want)
	}

	dev := readOutputCSV(t, filepath.Join(dir, "deviation.csv"))
	if len(dev) != 1+2*3 || dev[6][0] != "us-east-canary" || dev[6][2] != "max" || dev[6][4] != "19.8000" || dev[6][1] != "2.5000" {
		t.Errorf("deviation.csv %q: want 3 statistics per pool, canary max p50 19.8 pp, configured mean 2.5 %%", dev)
	}

	drains := readOutputCSV(t, filepath.Join(dir, "drains.csv"))
	if len(drains) != 2 || drains[1][0] != "us-east-canary" || drains[1][3] != "12:00:00" || drains[1][5] != "61.000" || drains[1][13] != "200" {
		t.Errorf("drains.csv %q", drains)
	}

	bins := readOutputCSV(t, filepath.Join(dir, "bins.csv"))
	if len(bins) != 1441 || bins[1][2] != "1000.0000" || bins[1][7] != "401.000" {
		t.Errorf("bins.csv: %d rows, first %q", len(bins), bins[1])
	}

	// Overwrite with a smaller result: no rows of the first one remain.
	if err := Write(dir, onePoolResult()); err != nil {
		t.Fatal(err)
	}
	if share := readOutputCSV(t, filepath.Join(dir, "share.csv")); len(share) != 31 || share[30][1] != "00:04:50" {
		t.Errorf("share.csv after overwrite: %d rows, want 31", len(share))
	}
}

func sameStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

func TestWriteErrors(t *testing.T) {
	// A file where the directory should be: Write says so.
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, canaryResult()); err == nil {
		t.Error("Write into a regular file: no error")
	}
	if err := Write(t.TempDir(), nil); err == nil {
		t.Error("Write(nil): no error")
	}
}

func TestResultJSON(t *testing.T) {
	dir := t.TempDir()
	r := canaryResult()
	r.Bins[3].Share[1].P95 = math.NaN() // no data: 0 in JSON, not an encoding error
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j ResultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	if j.Record != "shop.example.com." || j.BinS != 60 || j.DurationS != 86400 || j.Runs != 200 || j.Seed != 1 || j.ElapsedS != 3.2 {
		t.Errorf("header: record %q bin %v duration %v runs %d seed %d elapsed %v", j.Record, j.BinS, j.DurationS, j.Runs, j.Seed, j.ElapsedS)
	}
	if len(j.Bins) != 1440 || j.Bins[305].StartS != 18300 || j.Bins[305].Share[1].P95 != 0.24 || j.Bins[305].Configured[1] != 0.05 {
		t.Errorf("bin 305: %+v", j.Bins[305])
	}
	if j.Bins[3].Share[1].P95 != 0 {
		t.Errorf("NaN share encoded as %v, want 0", j.Bins[3].Share[1].P95)
	}
	if got := j.Bins[0].SiteShare; len(got) != 2 || len(got[0]) != 2 {
		t.Errorf("site_share %v: want [site][pool]", got)
	}
	// Deviations are percentage points in Result, fractions in JSON.
	if d := j.Deviation[1]; d.Pool != "us-east-canary" || math.Abs(d.Max.P50-0.198) > 1e-12 || d.ConfiguredMean != 0.025 {
		t.Errorf("deviation %+v: want max p50 0.198 and configured mean 0.025", d)
	}
	if d := j.Drains[0]; d.AtS != 43200 || d.SafeAtS.P50 != 61 || d.LastQueryS.P95 != 62 || d.Label != "drain us-east-canary" {
		t.Errorf("drain %+v", d)
	}
	if len(j.Phases) != 2 || j.Phases[1].AtS != 43200 || len(j.Cost) != 4 || len(j.Notable) != 2 || j.Notable[0].BinS != 18300 {
		t.Errorf("phases %+v cost %d notable %+v", j.Phases, len(j.Cost), j.Notable)
	}
	// The keys the dashboard reads, by name.
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"record", "pools", "sites", "bin_s", "duration_s", "runs", "seed", "elapsed_s", "phases", "bins", "deviation", "drains", "cost", "notable"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("result.json has no %q", k)
		}
	}
	bin0 := raw["bins"].([]any)[0].(map[string]any)
	for _, k := range []string{"start_s", "share", "configured", "site_share", "user_qps", "auth_qps", "auth_qps_band", "entries"} {
		if _, ok := bin0[k]; !ok {
			t.Errorf("a bin has no %q", k)
		}
	}

	// An empty result: arrays, never null.
	empty, err := json.Marshal((&Result{}).JSON())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(empty, []byte("null")) {
		t.Errorf("empty result JSON has nulls: %s", empty)
	}
}

// blend is c at alpha a (0..255) over white, as the PNG shows it.
func blend(c, a uint8) uint8 {
	return uint8(math.Round((float64(c)*float64(a) + 255*float64(255-a)) / 255))
}

// bandPixels counts the pixels of img showing pool's translucent band
// over the white background.
func bandPixels(img image.Image, pool int) int {
	col := chartColor(pool)
	want := [3]uint8{blend(col.R, bandAlpha), blend(col.G, bandAlpha), blend(col.B, bandAlpha)}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			ok := true
			for i := range got {
				if d := int(got[i]) - int(want[i]); d < -3 || d > 3 {
					ok = false
				}
			}
			if ok {
				n++
			}
		}
	}
	return n
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
		t.Errorf("%s is %v, want a readable size", path, b)
	}
	return img
}

func checkSVG(t *testing.T, path string, texts ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s does not parse as XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", path, root)
	}
	for _, s := range texts {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("%s does not show %q", path, s)
		}
	}
}

func TestCharts(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, canaryResult()); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, filepath.Join(dir, "share.png"))
	total := img.Bounds().Dx() * img.Bounds().Dy()
	// The canary's band (3.5–13.5 % for 12 h) covers about 4 % of the
	// image; us-east's (86.5–96.5 %) as much.
	for pool := range 2 {
		if n := bandPixels(img, pool); n < total/100 {
			t.Errorf("share.png: %d pixels of pool %d's band, want ≥ %d", n, pool, total/100)
		}
	}
	checkSVG(t, filepath.Join(dir, "share.svg"), "share of user queries (%)", "time (h)", "drain us-east-canary (12:00)",
		"us-east-canary: p50, p5–p95 band", "us-east-canary: configured", "shop.example.com")
	decodePNG(t, filepath.Join(dir, "cost.png"))
	decodePNG(t, filepath.Join(dir, "entries.png"))
	checkSVG(t, filepath.Join(dir, "cost.svg"), "bigpublic-us", "isp-small", `phase &#34;drain us-east-canary&#34;`, "0.0167", "6.65")
	checkSVG(t, filepath.Join(dir, "entries.svg"), "resolver cache entries", "399")

	// The same result without a band (p5 = p95 = p50): the band's
	// colour is gone, so the count above measures the band.
	r := canaryResult()
	for i := range r.Bins {
		for p := range r.Bins[i].Share {
			s := &r.Bins[i].Share[p]
			s.P5, s.P95 = s.P50, s.P50
		}
	}
	flat := t.TempDir()
	if err := Write(flat, r); err != nil {
		t.Fatal(err)
	}
	if n := bandPixels(decodePNG(t, filepath.Join(flat, "share.png")), 1); n > total/1000 {
		t.Errorf("share.png without a band: %d pixels of the band's colour", n)
	}
}

func TestChartsEdgeCases(t *testing.T) {
	// No bins, no cost, one pool, many phases close together, many
	// sites: every file is still written and valid.
	many := onePoolResult()
	for i := range 12 {
		site := "site-with-a-long-name-" + string(rune('a'+i))
		many.Sites = append(many.Sites, site)
		many.Cost = append(many.Cost, Cost{Phase: "start", Site: site, AuthQPS: float64(i) * 10.5, Entries: float64(i * 1000), UserQPS: 10})
		many.Phases = append(many.Phases, PhaseInfo{At: time.Duration(60+i) * time.Second, Label: "weights canary=" + string(rune('0'+i%10))})
		many.Cost = append(many.Cost, Cost{Phase: many.Phases[len(many.Phases)-1].Label, Site: site, AuthQPS: 1, Entries: 2, UserQPS: 10})
	}
	for name, r := range map[string]*Result{
		"empty":   {},
		"onepool": onePoolResult(),
		"many":    many,
	} {
		dir := t.TempDir()
		if err := Write(dir, r); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, f := range []string{"share", "cost", "entries"} {
			decodePNG(t, filepath.Join(dir, f+".png"))
			checkSVG(t, filepath.Join(dir, f+".svg"))
		}
	}
}

func TestHoursTicker(t *testing.T) {
	for _, c := range []struct {
		hi    float64
		first string
		n     int
	}{
		{24, "0", 9}, {1, "0:00", 7}, {5.0 / 60, "0:00", 6}, {168, "0", 8},
	} {
		var labels []string
		for _, tk := range (hoursTicker{}).Ticks(0, c.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) != c.n || labels[0] != c.first {
			t.Errorf("ticks 0..%v h: %q, want %d labels from %q", c.hi, labels, c.n, c.first)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtClock(0), "00:00:00"}, {fmtClock(25*time.Hour + 61*time.Second), "25:01:01"},
		{fmtClockShort(13*time.Hour + 5*time.Minute), "13:05"}, {fmtClockShort(10 * time.Second), "00:00:10"},
		{fmtNum(-0.0000001, 4), "0.0000"}, {fmtNum(math.NaN(), 2), ""}, {csvPct(0.05), "5.0000"},
		{fmtGrouped(1440), "1,440"}, {fmtGrouped(1234567), "1,234,567"}, {fmtGrouped(-1000), "-1,000"},
		{fmtQPS(1.0 / 60), "0.0167"}, {fmtQPS(71.4), "71.4"}, {fmtQPS(9.8), "9.80"}, {fmtQPS(0.99983), "1.00"}, {fmtQPS(99.96), "100"}, {fmtQPS(0.0001), "1.00e-04"}, {fmtQPS(5000), "5,000"},
		{fmtTimes(4284.2), "×4,284"}, {fmtTimes(8), "×8.0"},
		{fmtRel(61), "+61 s"}, {fmtRel(2.5), "+2.5 s"}, {fmtRel(3600), "+1h0m0s"},
		{fmtRelBand(Band{P5: 60, P95: 62}), "+60…+62 s"}, {fmtRelBand(Band{P5: 60, P95: 60}), "+60 s"}, {fmtRelBand(Band{P5: 60, P95: 3600}), "+60 s…+1h0m0s"},
		{fmtBinWidth(time.Minute), "1-min"}, {fmtDurWords(24 * time.Hour), "24 h"}, {fmtDurWords(10 * time.Second), "10 s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
