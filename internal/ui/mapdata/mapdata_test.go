package mapdata

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAssetUpToDate regenerates assets/land.js from land-110m.json and
// fails when the committed asset differs (run go generate in internal/ui).
func TestAssetUpToDate(t *testing.T) {
	src, err := os.ReadFile("land-110m.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := LandJS(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../assets/land.js")
	if err != nil {
		t.Fatalf("%v (run: go generate ./internal/ui)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("internal/ui/assets/land.js is not what land-110m.json generates (%d bytes, want %d): run go generate ./internal/ui", len(got), len(want))
	}
	if len(got) > 80<<10 {
		t.Errorf("land.js is %d bytes, over the 80 KB budget", len(got))
	}
}

// TestLandPath checks the path's shape: only M, l, z commands with
// numbers of at most one decimal, every ring at least partly inside the
// viewBox (rings across the antimeridian reach past it on one side and
// are drawn twice), and enough rings and points for a recognisable world.
func TestLandPath(t *testing.T) {
	src, err := os.ReadFile("land-110m.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := LandPath(src)
	if err != nil {
		t.Fatal(err)
	}
	if bad := regexp.MustCompile(`[^Mlz0-9.,\-]`).FindString(d); bad != "" {
		t.Fatalf("path has %q", bad)
	}
	if n := regexp.MustCompile(`\.\d\d`).FindString(d); n != "" {
		t.Fatalf("number with two decimals: %q", n)
	}
	num := regexp.MustCompile(`-?(\d+(\.\d)?|\.\d)`)
	rings, points := 0, 0
	for _, sub := range strings.Split(strings.TrimSuffix(d, "z"), "z") {
		rings++
		mv, rest, ok := strings.Cut(strings.TrimPrefix(sub, "M"), "l")
		if !ok {
			t.Fatalf("ring %d without lineto: %.40q", rings, sub)
		}
		xy := num.FindAllString(mv, -1)
		if len(xy) != 2 {
			t.Fatalf("ring %d moveto %q", rings, mv)
		}
		x, y := tenths(t, xy[0]), tenths(t, xy[1])
		lo, hi := x, x
		ds := num.FindAllString(rest, -1)
		if len(ds)%2 != 0 || len(ds) < 4 {
			t.Fatalf("ring %d has %d numbers", rings, len(ds))
		}
		for i := 0; i < len(ds); i += 2 {
			x, y = x+tenths(t, ds[i]), y+tenths(t, ds[i+1])
			if x < -3600 || x > 7200 || y < 0 || y > 1800 {
				t.Fatalf("ring %d point (%d, %d) tenths far outside the viewBox", rings, x, y)
			}
			lo, hi = min(lo, x), max(hi, x)
			points++
		}
		if hi <= 0 || lo >= 3600 {
			t.Errorf("ring %d spans x %d..%d tenths, outside the viewBox", rings, lo, hi)
		}
	}
	if rings < 100 || points < 4000 {
		t.Errorf("%d rings, %d points: too few for the 110m land", rings, points)
	}
}

func tenths(t *testing.T, s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	i, f, _ := strings.Cut(s, ".")
	v := 0
	for _, c := range i {
		v = v*10 + int(c-'0')
	}
	v *= 10
	if f != "" {
		v += int(f[0] - '0')
	}
	if neg {
		v = -v
	}
	return v
}

func TestNum(t *testing.T) {
	for v, want := range map[int]string{0: "0", 5: ".5", -5: "-.5", 10: "1", 123: "12.3", -120: "-12", 3600: "360"} {
		var b bytes.Buffer
		num(&b, v, false)
		if b.String() != want {
			t.Errorf("num(%d) = %q, want %q", v, b.String(), want)
		}
	}
}
