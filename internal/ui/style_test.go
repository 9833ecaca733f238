package ui_test

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStateColourContrast checks each state colour of style.css against
// the page's background in both schemes (Chromium's Canvas: white, and
// #121212 in dark mode) for WCAG's 4.5:1 for text.
func TestStateColourContrast(t *testing.T) {
	css, err := os.ReadFile("assets/style.css")
	if err != nil {
		t.Fatal(err)
	}
	s := string(css)
	light := s[:strings.Index(s, "@media (prefers-color-scheme: dark)")]
	darkAt := strings.Index(s, "@media (prefers-color-scheme: dark)")
	dark := s[darkAt : darkAt+strings.Index(s[darkAt:], "}\n}")]
	for _, scheme := range []struct {
		name, css string
		bg        [3]float64
	}{{"light", light, [3]float64{255, 255, 255}}, {"dark", dark, [3]float64{0x12, 0x12, 0x12}}} {
		for _, state := range []string{"up", "down", "drain", "disabled"} {
			m := regexp.MustCompile(`--` + state + `: #([0-9a-fA-F]{6})`).FindStringSubmatch(scheme.css)
			if m == nil {
				t.Errorf("%s scheme: no --%s colour", scheme.name, state)
				continue
			}
			var c [3]float64
			for i := range c {
				v, _ := strconv.ParseUint(m[1][2*i:2*i+2], 16, 8)
				c[i] = float64(v)
			}
			if r := contrast(c, scheme.bg); r < 4.5 {
				t.Errorf("%s scheme: --%s #%s has contrast %.2f:1 with the page, want 4.5:1", scheme.name, state, m[1], r)
			}
		}
	}
}

func contrast(a, b [3]float64) float64 {
	la, lb := luminance(a), luminance(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func luminance(c [3]float64) float64 {
	ch := func(v float64) float64 {
		v /= 255
		if v <= 0.03928 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*ch(c[0]) + 0.7152*ch(c[1]) + 0.0722*ch(c[2])
}
