package simulate

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
)

// outChart is one figure, drawn once per output format.
type outChart struct {
	name string
	w, h vg.Length
	draw func(c vgdraw.Canvas) error
}

// charts are the figures Write draws.
func charts(r *Result) []outChart {
	return []outChart{shareChart(r), costChart(r, "cost"), costChart(r, "entries")}
}

// renderChart draws ch in format ("png" or "svg").
func renderChart(ch outChart, format string) (data []byte, err error) {
	defer func() {
		// gonum/plot panics on some degenerate input; a chart is not
		// worth the process.
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("drawing %s: %v", ch.name, p)
		}
	}()
	cw, err := vgdraw.NewFormattedCanvas(ch.w, ch.h, format)
	if err != nil {
		return nil, err
	}
	dc := vgdraw.New(cw)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	if err := ch.draw(dc); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := cw.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// chartPalette: distinguishable colours for pools and phases (the common
// "category 10" set).
var chartPalette = []color.NRGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255},
}

func chartColor(i int) color.NRGBA { return chartPalette[i%len(chartPalette)] }

// bandAlpha is the p5–p95 band's opacity.
const bandAlpha = 64

func bandColor(c color.NRGBA) color.NRGBA { c.A = bandAlpha; return c }

func chartText(size vg.Length) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, size),
		Handler: plot.DefaultTextHandler,
	}
}

// legendBlock lays legends out left to right under the plot, wrapping
// to a new row when the width runs out; it returns the height it needs
// and draws them when draw is set.
func legendBlock(c vgdraw.Canvas, legends []plot.Legend, drawIt bool) vg.Length {
	const gap, pad = vg.Length(18), vg.Length(6)
	x, y := c.Min.X+pad*4, c.Max.Y-pad
	rowH, total := vg.Length(0), pad
	for i := range legends {
		l := &legends[i]
		size := l.Rectangle(c).Size()
		if x > c.Min.X+pad*4 && x+size.X > c.Max.X-pad {
			y -= rowH + pad
			total += rowH + pad
			x, rowH = c.Min.X+pad*4, 0
		}
		if drawIt {
			sub := c
			sub.Min = vg.Point{X: x, Y: y - size.Y}
			sub.Max = vg.Point{X: x + size.X, Y: y}
			l.Draw(sub)
		}
		x += size.X + gap
		rowH = max(rowH, size.Y)
	}
	return total + rowH + pad
}

// chartMargin is the white space around a chart's plot.
const chartMargin = vg.Length(6)

func newChartPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.Title.TextStyle.Font.Size = 12
	return p
}

func newChartLegend() plot.Legend {
	l := plot.NewLegend()
	l.TextStyle = chartText(9)
	l.Top, l.Left = true, true
	l.ThumbnailWidth = vg.Points(22)
	l.Padding = vg.Points(2)
	return l
}

// hoursTicker marks round numbers of hours (hours:minutes under an
// hour's step) with at most nine labels.
type hoursTicker struct{}

func (hoursTicker) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if span <= 0 {
		return []plot.Tick{{Value: lo, Label: fmtHours(lo)}}
	}
	steps := []float64{1.0 / 60, 2.0 / 60, 5.0 / 60, 10.0 / 60, 0.25, 0.5, 1, 2, 3, 4, 6, 12, 24, 48, 72, 168}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+1e-9; i++ {
		v := i * step
		label := fmtHours(v)
		if step < 1 {
			// Hours and minutes read better than 0.083.
			m := int(math.Round(v * 60))
			label = fmt.Sprintf("%d:%02d", m/60, m%60)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		// a minor tick halfway
		if m := v + step/2; m < hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	return ticks
}

// fmtHours labels an hour value: "6", "1.5", "0.25".
func fmtHours(h float64) string {
	return strconv.FormatFloat(math.Round(h*1000)/1000+0, 'f', -1, 64)
}

// percentTicker labels 0, 20, …, 100 (or finer for a small range).
type percentTicker struct{}

func (percentTicker) Ticks(lo, hi float64) []plot.Tick {
	step := 20.0
	if hi-lo < 40 {
		step = 5
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		if m := v + step/2; m < hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	return ticks
}

// stepXYs turns per-bin values into a step line: each bin's value held
// from its start to its end (hours on x, percent on y).
func stepXYs(r *Result, value func(b *Bin) float64) plotter.XYs {
	xys := make(plotter.XYs, 0, 2*len(r.Bins))
	w := r.Bin.Hours()
	for i := range r.Bins {
		b := &r.Bins[i]
		v := finite(value(b)) * 100
		x := b.Start.Hours()
		xys = append(xys, plotter.XY{X: x, Y: v}, plotter.XY{X: x + w, Y: v})
	}
	return xys
}

// phaseMarks draws a vertical line at each phase change with its
// label along it; labels closer than a line of text are joined so they
// never overlap.
type phaseMarks struct {
	at     []float64 // hours
	labels []string
}

func (m *phaseMarks) Plot(c vgdraw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	line := vgdraw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
	sty := chartText(8)
	sty.Color = color.Gray{Y: 50}
	sty.Rotation = math.Pi / 2
	sty.XAlign, sty.YAlign = vgdraw.XRight, vgdraw.YTop
	lineH := sty.FontExtents().Height
	type group struct {
		x      vg.Length
		labels []string
	}
	var groups []group
	for i, h := range m.at {
		x := trX(h)
		if x < c.Min.X || x > c.Max.X {
			continue
		}
		c.StrokeLine2(line, x, c.Min.Y, x, c.Max.Y)
		if n := len(groups); n > 0 && x-groups[n-1].x < lineH*1.2 {
			groups[n-1].labels = append(groups[n-1].labels, m.labels[i])
			continue
		}
		groups = append(groups, group{x: x, labels: []string{m.labels[i]}})
	}
	maxW := (c.Max.Y - c.Min.Y) * 0.9
	for _, g := range groups {
		label := fitText(sty, strings.Join(g.labels, "; "), maxW)
		c.FillText(sty, vg.Point{X: g.x + lineH*0.15, Y: c.Max.Y - vg.Points(3)}, label)
	}
}

// fitText shortens s with an ellipsis until it is at most w wide.
func fitText(sty text.Style, s string, w vg.Length) string {
	if sty.Width(s) <= w {
		return s
	}
	rs := []rune(s)
	for len(rs) > 1 {
		rs = rs[:len(rs)-1]
		if t := string(rs) + "…"; sty.Width(t) <= w {
			return t
		}
	}
	return "…"
}

// peakMark marks the largest excursion (one run's peak) with a ring and
// its value.
type peakMark struct {
	x, y  float64 // hours, percent
	label string
	color color.Color
}

func (m *peakMark) Plot(c vgdraw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	pt := vg.Point{X: trX(m.x), Y: trY(m.y)}
	if !c.Contains(pt) {
		return
	}
	c.DrawGlyph(vgdraw.GlyphStyle{Color: m.color, Radius: vg.Points(4), Shape: vgdraw.RingGlyph{}}, pt)
	sty := chartText(8)
	sty.YAlign = vgdraw.YCenter
	sty.XAlign = vgdraw.XLeft
	if pt.X > (c.Min.X+c.Max.X)/2 {
		sty.XAlign = vgdraw.XRight
		pt.X -= vg.Points(7)
	} else {
		pt.X += vg.Points(7)
	}
	c.FillText(sty, pt, m.label)
}

func (m *peakMark) DataRange() (xmin, xmax, ymin, ymax float64) { return m.x, m.x, m.y, m.y }

func shareChart(r *Result) outChart {
	return outChart{name: "share", w: 12 * vg.Inch, h: 6.5 * vg.Inch, draw: func(dc vgdraw.Canvas) error {
		p := newChartPlot(fmt.Sprintf("%s: share of user queries per pool (%d runs, %s; line p50, band p5–p95, dashed configured)",
			recordName(r), r.Runs, fmtBinWidth(r.Bin)+" bins"))
		p.X.Label.Text = "time (h)"
		p.Y.Label.Text = "share of user queries (%)"
		p.X.Tick.Marker = hoursTicker{}
		p.Y.Tick.Marker = percentTicker{}
		p.Add(plotter.NewGrid())
		var legends []plot.Legend
		shown := 0
		for i, pool := range r.Pools {
			if !poolInPlay(r, i) {
				continue // no user queries: nothing to draw
			}
			col := chartColor(shown)
			shown++
			upper := stepXYs(r, func(b *Bin) float64 { return elemAt(b.Share, i).P95 })
			lower := stepXYs(r, func(b *Bin) float64 { return elemAt(b.Share, i).P5 })
			ring := make(plotter.XYs, 0, len(upper)+len(lower))
			ring = append(ring, upper...)
			for j := len(lower) - 1; j >= 0; j-- {
				ring = append(ring, lower[j])
			}
			l := newChartLegend()
			var band *plotter.Polygon
			if len(ring) > 0 {
				var err error
				band, err = plotter.NewPolygon(ring)
				if err != nil {
					return err
				}
				band.Color = bandColor(col)
				band.LineStyle.Width = 0
				p.Add(band)
			}
			med, err := plotter.NewLine(stepXYs(r, func(b *Bin) float64 { return elemAt(b.Share, i).P50 }))
			if err != nil {
				return err
			}
			med.Color, med.Width = col, vg.Points(1.2)
			conf, err := plotter.NewLine(stepXYs(r, func(b *Bin) float64 { return elemAt(b.Configured, i) }))
			if err != nil {
				return err
			}
			dark := col
			dark.R, dark.G, dark.B = dark.R/2, dark.G/2, dark.B/2
			conf.Color, conf.Width = dark, vg.Points(1.2)
			conf.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			if len(r.Bins) > 0 {
				p.Add(med, conf)
			}
			if band != nil {
				l.Add(pool+": p50, p5–p95 band", band, med)
			} else {
				l.Add(pool+": p50", med)
			}
			l.Add(pool+": configured", conf)
			legends = append(legends, l)
		}
		var marks phaseMarks
		for _, ph := range r.Phases {
			if ph.At <= 0 {
				continue
			}
			marks.at = append(marks.at, ph.At.Hours())
			marks.labels = append(marks.labels, fmt.Sprintf("%s (%s)", ph.Label, fmtClockShort(ph.At)))
		}
		if len(marks.at) > 0 {
			p.Add(&marks)
		}
		if e, ok := biggestExcursion(r); ok {
			shownIndex := 0
			for i := range r.Pools {
				if r.Pools[i] == e.Pool {
					break
				}
				if poolInPlay(r, i) {
					shownIndex++
				}
			}
			p.Add(&peakMark{x: e.Bin.Hours() + r.Bin.Hours()/2, y: e.Share * 100, color: chartColor(shownIndex),
				label: fmt.Sprintf("%s peak %s %% in one run (%s)", e.Pool, fmtPct(e.Share), fmtClockShort(e.Bin))})
		}
		p.X.Min, p.X.Max = 0, math.Max(float64(len(r.Bins))*r.Bin.Hours(), 1.0/60)
		p.Y.Min, p.Y.Max = 0, 100
		legH := legendBlock(dc, legends, false)
		legendBlock(vgdraw.Crop(dc, 0, 0, 0, -(dc.Max.Y-dc.Min.Y-legH)), legends, true)
		p.Draw(vgdraw.Crop(dc, chartMargin, -chartMargin, legH, -chartMargin))
		return nil
	}}
}

// costChart draws bars per resolver site (x) and phase (colour): the
// authoritative q/s ("cost") or the cache entries ("entries").
func costChart(r *Result, name string) outChart {
	return outChart{name: name, w: 10 * vg.Inch, h: 6 * vg.Inch, draw: func(dc vgdraw.Canvas) error {
		phases, sites := costAxes(r)
		value := func(c Cost) float64 { return c.AuthQPS }
		title := fmt.Sprintf("%s: authoritative queries per second (cache misses) per resolver site and phase", recordName(r))
		ylabel := "queries to steer per second"
		if name == "entries" {
			value = func(c Cost) float64 { return c.Entries }
			title = fmt.Sprintf("%s: resolver cache entries per site and phase", recordName(r))
			ylabel = "cache entries (mean)"
		}
		vals := make([][]float64, len(phases)) // [phase][site]
		top := 0.0
		for i := range vals {
			vals[i] = make([]float64, len(sites))
		}
		for _, c := range r.Cost {
			pi, si := indexOfName(phases, c.Phase), indexOfName(sites, c.Site)
			v := finite(value(c))
			vals[pi][si] += v
			top = max(top, vals[pi][si])
		}
		p := newChartPlot(title)
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "resolver site"
		if len(sites) == 0 {
			p.Title.Text += " (no data)"
		}
		grid := plotter.NewGrid()
		grid.Vertical.Color = nil
		p.Add(grid)
		// Room for the value labels above the bars.
		p.Y.Min, p.Y.Max = 0, math.Max(top*1.18, 1e-9)
		if top == 0 {
			p.Y.Max = 1
		}
		dataW := (dc.Max.X - dc.Min.X) * 0.85
		group := vg.Length(0.7) * dataW / vg.Length(max(len(sites), 1))
		group = min(group, vg.Points(160))
		barW := group / vg.Length(max(len(phases), 1))
		lsty := chartText(7)
		lsty.XAlign, lsty.YAlign = vgdraw.XCenter, vgdraw.YBottom
		labelW := vg.Length(0)
		for _, row := range vals {
			for _, v := range row {
				labelW = max(labelW, lsty.Width(fmtShortNum(v)))
			}
		}
		rotate := labelW > barW*1.1
		if rotate {
			lsty.Rotation = math.Pi / 2
			lsty.XAlign, lsty.YAlign = vgdraw.XLeft, vgdraw.YCenter
		}
		var legends []plot.Legend // one per phase, so they flow in rows
		for pi, ph := range phases {
			if len(sites) == 0 {
				break
			}
			bars, err := plotter.NewBarChart(plotter.Values(vals[pi]), barW)
			if err != nil {
				return err
			}
			bars.Color = chartColor(pi)
			bars.LineStyle.Width = 0
			bars.Offset = (vg.Length(pi) - vg.Length(len(phases)-1)/2) * barW
			p.Add(bars)
			xys := make(plotter.XYs, len(sites))
			texts := make([]string, len(sites))
			for si := range sites {
				xys[si] = plotter.XY{X: float64(si), Y: vals[pi][si]}
				if vals[pi][si] != 0 {
					// No label on an empty bar: the axis says 0.
					texts[si] = fmtShortNum(vals[pi][si])
				}
			}
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
			if err != nil {
				return err
			}
			for i := range labels.TextStyle {
				labels.TextStyle[i] = lsty
			}
			labels.Offset = vg.Point{X: bars.Offset, Y: vg.Points(2)}
			p.Add(labels)
			l := newChartLegend()
			l.Add(fmt.Sprintf("phase %q", ph), bars)
			legends = append(legends, l)
		}
		if len(sites) > 0 {
			p.NominalX(sites...)
			p.X.Min, p.X.Max = -0.5, float64(len(sites))-0.5
		}
		if len(sites) > 6 {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = vgdraw.XRight, vgdraw.YCenter
		}
		legH := legendBlock(dc, legends, false)
		legendBlock(vgdraw.Crop(dc, 0, 0, 0, -(dc.Max.Y-dc.Min.Y-legH)), legends, true)
		p.Draw(vgdraw.Crop(dc, chartMargin, -chartMargin, legH, -chartMargin))
		return nil
	}}
}

// costAxes are the phases (in time order, then as they appear in Cost)
// and the sites (in Result.Sites order, then as they appear) that have
// cost rows.
func costAxes(r *Result) (phases, sites []string) {
	hasP, hasS := map[string]bool{}, map[string]bool{}
	for _, c := range r.Cost {
		hasP[c.Phase], hasS[c.Site] = true, true
	}
	add := func(list []string, name string, has map[string]bool) []string {
		if has[name] && indexOfName(list, name) < 0 {
			list = append(list, name)
		}
		return list
	}
	for _, ph := range r.Phases {
		phases = add(phases, ph.Label, hasP)
	}
	for _, s := range r.Sites {
		sites = add(sites, s, hasS)
	}
	for _, c := range r.Cost {
		phases = add(phases, c.Phase, hasP)
		sites = add(sites, c.Site, hasS)
	}
	return phases, sites
}

func indexOfName(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func recordName(r *Result) string {
	if r.Record == "" {
		return "(no record)"
	}
	return strings.TrimSuffix(r.Record, ".")
}

// fmtShortNum formats a rate or count compactly with about 3 significant
// digits: 71.4, 0.0167, 5000, 1.2e+06.
func fmtShortNum(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
