package plot

import (
	"image/color"
	"math"
	"strings"
)

// Layout sizes in pixels.
const (
	defaultWidth       = 900
	defaultChartHeight = 340
	figureTitleHeight  = 36
	chartTitleHeight   = 26
	rightMargin        = 22
	tickLength         = 4
)

var (
	ink       = color.RGBA{0x22, 0x22, 0x22, 0xff}
	axisColor = color.RGBA{0x55, 0x55, 0x55, 0xff}
	gridColor = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	faint     = color.RGBA{0x88, 0x88, 0x88, 0xff}
	spanFill  = color.NRGBA{0xe6, 0x9f, 0x00, 0x30}
	spanInk   = color.RGBA{0x9a, 0x5b, 0x00, 0xff}
)

// size returns the figure's pixel size.
func (f *Figure) size() (int, int) {
	w := f.Width
	if w <= 0 {
		w = defaultWidth
	}
	h := 0
	if f.Title != "" {
		h += figureTitleHeight
	}
	for _, ch := range f.Charts {
		h += ch.height()
	}
	return w, h
}

func (ch *Chart) height() int {
	if ch.Height > 0 {
		return ch.Height
	}
	return defaultChartHeight
}

// render draws the whole figure on c.
func (f *Figure) render(c canvas, fonts *fontSet) {
	w, _ := f.size()
	y := 0.0
	if f.Title != "" {
		c.text(float64(w)/2, 24, f.Title, styleFigureTitle, anchorMiddle, false, ink)
		y = figureTitleHeight
	}
	for _, ch := range f.Charts {
		ch.render(c, fonts, y, float64(w))
		y += float64(ch.height())
	}
}

// axis maps data values to pixels along one direction.
type axis struct {
	scale  Scale
	lo, hi float64 // data range
	p0, p1 float64 // pixels of lo and hi
	ticks  []tick
}

// pos returns the pixel of v; ok is false for values a log axis cannot show.
func (a *axis) pos(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	if a.scale == Log {
		if v <= 0 {
			return 0, false
		}
		return a.p0 + (math.Log10(v)-math.Log10(a.lo))/(math.Log10(a.hi)-math.Log10(a.lo))*(a.p1-a.p0), true
	}
	return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0), true
}

// usable reports whether v can be placed on an axis of scale s.
func usable(v float64, s Scale) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (s != Log || v > 0)
}

// autoRange returns the range of vals on scale s: for a log scale whole
// decades around them, for a linear one their extent, widened to nice steps
// and to 0 when asked.
func autoRange(vals []float64, s Scale, nice, withZero bool) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if usable(v, s) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if s == Log {
		if math.IsInf(lo, 1) {
			return 1, 10
		}
		lo, hi = math.Pow(10, math.Floor(math.Log10(lo)+1e-9)), math.Pow(10, math.Ceil(math.Log10(hi)-1e-9))
		if hi <= lo {
			hi = lo * 10
		}
		return lo, hi
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	if withZero && lo > 0 {
		lo = 0
	}
	if withZero && hi < 0 {
		hi = 0
	}
	if hi <= lo {
		d := math.Max(math.Abs(lo)*0.5, 1)
		lo, hi = lo-d, hi+d
		if withZero && lo < 0 && hi-d >= 0 {
			lo = 0
		}
	}
	if nice {
		// Widen to the step the ticks of the widened range will use, so
		// that both ends carry a tick.
		step := niceStep(hi-lo, 5)
		step = niceStep(math.Ceil(hi/step-1e-9)*step-math.Floor(lo/step+1e-9)*step, 5)
		lo, hi = math.Floor(lo/step+1e-9)*step, math.Ceil(hi/step-1e-9)*step
	}
	return lo, hi
}

func (ch *Chart) render(c canvas, fonts *fontSet, top, width float64) {
	bottomEdge := top + float64(ch.height())
	bars := len(ch.Bars) > 0

	// Ranges.
	var xs, ys []float64
	for _, l := range ch.Lines {
		for _, p := range l.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
	}
	for _, s := range ch.Spans {
		xs = append(xs, s.From, s.To)
	}
	for _, b := range ch.Bars {
		ys = append(ys, b.Value)
	}
	x := &axis{scale: ch.XScale}
	y := &axis{scale: ch.YScale}
	if bars {
		x.scale, x.lo, x.hi = Linear, -0.5, float64(len(ch.Bars))-0.5
	} else if ch.X.Min < ch.X.Max {
		x.lo, x.hi = ch.X.Min, ch.X.Max
	} else {
		x.lo, x.hi = autoRange(xs, x.scale, false, ch.XFromZero)
	}
	if ch.Y.Min < ch.Y.Max {
		y.lo, y.hi = ch.Y.Min, ch.Y.Max
	} else {
		if bars {
			// Leave room above the tallest bar for its note.
			top := math.Inf(-1)
			for _, v := range ys {
				if usable(v, y.scale) {
					top = max(top, v)
				}
			}
			if !math.IsInf(top, -1) {
				if y.scale == Log {
					ys = append(ys, top*1.8)
				} else {
					ys = append(ys, top*1.12)
				}
			}
		}
		y.lo, y.hi = autoRange(ys, y.scale, true, y.scale == Linear)
	}
	if y.scale == Log {
		y.ticks = logTicks(y.lo, y.hi)
	} else {
		y.ticks = linearTicks(y.lo, y.hi, 5)
	}
	if x.scale == Log {
		x.ticks = logTicks(x.lo, x.hi)
	} else if !bars {
		x.ticks = linearTicks(x.lo, x.hi, 8)
	}

	// Margins.
	tickW := 0.0
	for _, t := range y.ticks {
		tickW = max(tickW, fonts.width(t.label, styleLabel))
	}
	left := 12 + tickW + 8
	if ch.YLabel != "" {
		left += 20
	}
	pl, pr := left, width-rightMargin
	var barLabels [][]string
	extraLines := 0
	if bars {
		barLabels = wrapLabels(ch.Bars, fonts, (pr-pl)/float64(len(ch.Bars))-8)
		for _, l := range barLabels {
			extraLines = max(extraLines, len(l)-1)
		}
	}
	bottomMargin := 26.0 + lineHeight*float64(extraLines)
	if ch.XLabel != "" {
		bottomMargin += 20
	}
	legend := ch.legendEntries()
	headerH := 8.0
	if ch.Title != "" || len(legend) > 0 {
		headerH = chartTitleHeight + 8
	}
	pt, pb := top+headerH, bottomEdge-bottomMargin
	x.p0, x.p1 = pl, pr
	y.p0, y.p1 = pb, pt

	// Spans, grid, bars, lines.
	for _, s := range ch.Spans {
		a, okA := x.pos(s.From)
		b, okB := x.pos(s.To)
		if !okA || !okB {
			continue
		}
		a, b = clamp(a, pl, pr), clamp(b, pl, pr)
		c.rect(a, pt, b, pb, spanFill)
		if s.Label != "" {
			c.text(a+5, pt+15, s.Label, styleLabel, anchorStart, false, spanInk)
		}
	}
	for _, t := range y.ticks {
		if p, ok := y.pos(t.v); ok {
			p = crisp(p)
			c.polyline([]Point{{pl, p}, {pr, p}}, gridColor, 1)
		}
	}
	for _, t := range x.ticks {
		if p, ok := x.pos(t.v); ok {
			p = crisp(p)
			c.polyline([]Point{{p, pt}, {p, pb}}, gridColor, 1)
		}
	}
	if bars {
		ch.drawBars(c, fonts, x, y, pb, barLabels)
	}
	empty := !bars
	for i, l := range ch.Lines {
		if ch.drawLine(c, l, ch.lineColor(i), x, y, pl, pt, pr, pb) {
			empty = false
		}
	}
	if empty {
		c.text((pl+pr)/2, (pt+pb)/2, "no data", styleLabel, anchorMiddle, false, faint)
	}

	// Axes, ticks and labels.
	c.polyline([]Point{{crisp(pl), pt}, {crisp(pl), crisp(pb)}, {pr, crisp(pb)}}, axisColor, 1)
	labelShift := fonts.ascent(styleLabel) / 2
	for _, t := range y.ticks {
		if p, ok := y.pos(t.v); ok {
			c.polyline([]Point{{pl - tickLength, crisp(p)}, {pl, crisp(p)}}, axisColor, 1)
			c.text(pl-tickLength-3, p+labelShift, t.label, styleLabel, anchorEnd, false, ink)
		}
	}
	for _, t := range x.ticks {
		if p, ok := x.pos(t.v); ok {
			c.polyline([]Point{{crisp(p), pb}, {crisp(p), pb + tickLength}}, axisColor, 1)
			c.text(p, pb+tickLength+13, t.label, styleLabel, anchorMiddle, false, ink)
		}
	}
	if ch.XLabel != "" {
		c.text((pl+pr)/2, pb+tickLength+33+lineHeight*float64(extraLines), ch.XLabel, styleLabel, anchorMiddle, false, ink)
	}
	if ch.YLabel != "" {
		c.text(12+fonts.ascent(styleLabel), (pt+pb)/2, ch.YLabel, styleLabel, anchorMiddle, true, ink)
	}
	if ch.Title != "" {
		c.text(pl, top+20, ch.Title, styleChartTitle, anchorStart, false, ink)
	}
	ch.drawLegend(c, fonts, legend, pr, top+20)
}

// legendEntry is one named line.
type legendEntry struct {
	name string
	col  color.RGBA
}

func (ch *Chart) legendEntries() []legendEntry {
	var out []legendEntry
	for i, l := range ch.Lines {
		if l.Name != "" {
			out = append(out, legendEntry{l.Name, ch.lineColor(i)})
		}
	}
	return out
}

// drawLegend draws the entries in a row ending at right, on the title's
// baseline.
func (ch *Chart) drawLegend(c canvas, fonts *fontSet, entries []legendEntry, right, baseline float64) {
	const swatch, gap, spacing = 18.0, 5.0, 16.0
	x := right
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		x -= fonts.width(e.name, styleLabel)
		c.text(x, baseline, e.name, styleLabel, anchorStart, false, ink)
		x -= gap + swatch
		mid := baseline - fonts.ascent(styleLabel)/2
		c.polyline([]Point{{x, mid}, {x + swatch, mid}}, e.col, 3)
		x -= spacing
	}
}

// lineColor returns line i's colour: its own, or the palette's.
func (ch *Chart) lineColor(i int) color.RGBA {
	if l := ch.Lines[i]; l.Color.A != 0 {
		return l.Color
	}
	return Palette[i%len(Palette)]
}

// drawBars draws the bars, their notes and their category labels, given
// as lines (see wrapLabels).
func (ch *Chart) drawBars(c canvas, fonts *fontSet, x, y *axis, pb float64, labels [][]string) {
	col := ch.BarColor
	if col.A == 0 {
		col = Palette[0]
	}
	slot := (x.p1 - x.p0) / float64(len(ch.Bars))
	base := pb
	if y.scale == Linear {
		if p, ok := y.pos(max(0, y.lo)); ok {
			base = p
		}
	}
	// Label every k-th category when even wrapped labels would overlap.
	widest := 0.0
	for _, lines := range labels {
		for _, l := range lines {
			widest = max(widest, fonts.width(l, styleLabel))
		}
	}
	every := max(1, int(math.Ceil((widest+6)/slot)))
	for i, b := range ch.Bars {
		cx, _ := x.pos(float64(i))
		if i%every == 0 {
			c.polyline([]Point{{crisp(cx), pb}, {crisp(cx), pb + tickLength}}, axisColor, 1)
			for k, l := range labels[i] {
				c.text(cx, pb+tickLength+13+lineHeight*float64(k), l, styleLabel, anchorMiddle, false, ink)
			}
		}
		v, ok := y.pos(b.Value)
		if !ok {
			continue
		}
		v = clamp(v, y.p1, pb)
		half := slot * 0.35
		c.rect(cx-half, v, cx+half, base, col)
		note := b.Note
		if note == "" {
			note = FormatValue(b.Value)
		}
		if fonts.width(note, styleLabel) <= slot*1.1 || len(ch.Bars) <= 12 {
			c.text(cx, v-5, note, styleLabel, anchorMiddle, false, ink)
		}
	}
}

// lineHeight is the distance between the lines of a wrapped label.
const lineHeight = 14.0

// wrapLabels breaks each bar's label at spaces into at most three lines
// no wider than width, where the words allow.
func wrapLabels(bars []Bar, fonts *fontSet, width float64) [][]string {
	out := make([][]string, len(bars))
	for i, b := range bars {
		var lines []string
		for _, w := range strings.Fields(b.Label) {
			if n := len(lines); n > 0 && (n == 3 || fonts.width(lines[n-1]+" "+w, styleLabel) <= width) {
				lines[n-1] += " " + w
				continue
			}
			lines = append(lines, w)
		}
		out[i] = lines
	}
	return out
}

// drawLine draws one line clipped to the plot area and reports whether any
// of it was visible.
func (ch *Chart) drawLine(c canvas, l Line, col color.RGBA, x, y *axis, pl, pt, pr, pb float64) bool {
	width := l.Width
	if width <= 0 {
		width = 2
	}
	// Pixel runs, broken at unusable points.
	var runs [][]Point
	var run []Point
	flush := func() {
		if len(run) > 0 {
			runs = append(runs, run)
		}
		run = nil
	}
	for _, p := range l.Points {
		px, okX := x.pos(p.X)
		py, okY := y.pos(p.Y)
		if !okX || !okY {
			flush()
			continue
		}
		if l.Step && len(run) > 0 {
			run = append(run, Point{px, run[len(run)-1].Y})
		}
		run = append(run, Point{px, py})
	}
	flush()
	visible := false
	for _, r := range runs {
		for _, part := range clipPolyline(r, pl, pt, pr, pb) {
			visible = true
			c.polyline(part, col, width)
		}
		if len(r) == 1 && inside(r[0], pl, pt, pr, pb) {
			visible = true
			c.polygon(disc(r[0], width), col)
		}
		if l.Markers {
			for _, p := range r {
				if inside(p, pl, pt, pr, pb) {
					c.polygon(disc(p, width+1.5), col)
				}
			}
		}
	}
	return visible
}

// clipPolyline cuts a polyline to the rectangle, returning the visible parts.
func clipPolyline(pts []Point, x0, y0, x1, y1 float64) [][]Point {
	var out [][]Point
	var cur []Point
	for i := 1; i < len(pts); i++ {
		a, b, ok := clipSegment(pts[i-1], pts[i], x0, y0, x1, y1)
		if !ok {
			if len(cur) > 1 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		if len(cur) == 0 || cur[len(cur)-1] != a {
			if len(cur) > 1 {
				out = append(out, cur)
			}
			cur = []Point{a}
		}
		cur = append(cur, b)
	}
	if len(cur) > 1 {
		out = append(out, cur)
	}
	return out
}

// clipSegment clips the segment a–b to the rectangle (Liang–Barsky).
func clipSegment(a, b Point, x0, y0, x1, y1 float64) (Point, Point, bool) {
	t0, t1 := 0.0, 1.0
	dx, dy := b.X-a.X, b.Y-a.Y
	for _, e := range [4][2]float64{{-dx, a.X - x0}, {dx, x1 - a.X}, {-dy, a.Y - y0}, {dy, y1 - a.Y}} {
		p, q := e[0], e[1]
		if p == 0 {
			if q < 0 {
				return a, b, false
			}
			continue
		}
		r := q / p
		if p < 0 {
			t0 = max(t0, r)
		} else {
			t1 = min(t1, r)
		}
		if t0 > t1 {
			return a, b, false
		}
	}
	na := a
	if t0 > 0 {
		na = Point{a.X + t0*dx, a.Y + t0*dy}
	}
	nb := b
	if t1 < 1 {
		nb = Point{a.X + t1*dx, a.Y + t1*dy}
	}
	return na, nb, true
}

func inside(p Point, x0, y0, x1, y1 float64) bool {
	return p.X >= x0 && p.X <= x1 && p.Y >= y0 && p.Y <= y1
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// crisp puts a one-pixel line on a pixel's centre.
func crisp(v float64) float64 { return math.Floor(v) + 0.5 }
