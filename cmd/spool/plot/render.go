package plot

import (
	"image/color"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const (
	// pixelDPI maps the package's pixel sizes to gonum's lengths; PNGs are
	// rendered at this resolution, so one pixel is one pixel.
	pixelDPI       = 96
	defaultWidth   = 900
	defaultHeight  = 340
	titleHeight    = 36
	defaultLineW   = 2
	barHalfWidth   = 0.35 // in bar positions: bars take 70% of their slot
	spanFillAlpha  = 0x22
	chartPaddingPx = 6
)

// px converts pixels to a gonum length.
func px(n float64) vg.Length { return vg.Length(n) * vg.Inch / pixelDPI }

// size returns the figure's width and height.
func (f *Figure) size() (vg.Length, vg.Length) {
	w := f.Width
	if w <= 0 {
		w = defaultWidth
	}
	h := 0
	if f.Title != "" {
		h += titleHeight
	}
	for _, ch := range f.Charts {
		h += ch.height()
	}
	return px(float64(w)), px(float64(h))
}

func (ch *Chart) height() int {
	if ch.Height > 0 {
		return ch.Height
	}
	return defaultHeight
}

// draw draws the title and the charts, top to bottom, on dc.
func (f *Figure) draw(dc draw.Canvas) error {
	top := dc.Max.Y
	if f.Title != "" {
		sty := gplot.New().Title.TextStyle
		sty.Font.Size = vg.Points(13)
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		dc.FillText(sty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: top - px(titleHeight)/2}, f.Title)
		top -= px(titleHeight)
	}
	for _, ch := range f.Charts {
		h := px(float64(ch.height()))
		area := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: dc.Min.X, Y: top - h},
			Max: vg.Point{X: dc.Max.X, Y: top},
		}}
		pad := px(chartPaddingPx)
		ch.plot().Draw(draw.Crop(area, pad, -pad, pad, -pad))
		top -= h
	}
	return nil
}

// finite reports whether v is a number that can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// plot builds the gonum plot of one chart.
func (ch *Chart) plot() *gplot.Plot {
	p := gplot.New()
	p.Title.Text = ch.Title
	p.X.Label.Text = ch.XLabel
	p.Y.Label.Text = ch.YLabel
	p.Legend.Top = true
	bars := len(ch.Bars) > 0
	logX := ch.XScale == Log && !bars
	logY := ch.YScale == Log
	// A point is drawable when finite, and positive on a logarithmic axis.
	drawable := func(pt Point) bool {
		return finite(pt.X) && finite(pt.Y) && (!logX || pt.X > 0) && (!logY || pt.Y > 0)
	}

	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe8}
	grid.Horizontal.Color = color.Gray{Y: 0xe8}
	if bars {
		grid.Vertical.Color = nil
	}
	p.Add(grid)
	if len(ch.Spans) > 0 {
		p.Add(&spanPlotter{spans: ch.Spans})
	}
	hasData := false
	if bars {
		hasData = ch.addBars(p, logY)
	}
	for i, l := range ch.Lines {
		col := l.Color
		if col == (color.RGBA{}) {
			col = Palette[i%len(Palette)]
		}
		width := l.Width
		if width <= 0 {
			width = defaultLineW
		}
		var first *plotter.Line
		for _, seg := range segments(l.Points, drawable) {
			xys := make(plotter.XYs, len(seg))
			for k, pt := range seg {
				xys[k] = plotter.XY{X: pt.X, Y: pt.Y}
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				continue // unreachable: segments holds finite points only
			}
			line.Color = col
			line.Width = px(width)
			if l.Step {
				line.StepStyle = plotter.PostStep
			}
			p.Add(line)
			if l.Markers {
				if sc, err := plotter.NewScatter(xys); err == nil {
					sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: px(width + 1.5), Shape: draw.CircleGlyph{}}
					p.Add(sc)
				}
			}
			if first == nil {
				first = line
			}
			hasData = true
		}
		if l.Name != "" && first != nil {
			p.Legend.Add(l.Name, first)
		}
	}
	if !hasData {
		noData(p)
		return p
	}

	if ch.X != (Range{}) && !bars {
		p.X.Min, p.X.Max = ch.X.Min, ch.X.Max
	} else if ch.XFromZero && !logX && !bars {
		p.X.Min = min(p.X.Min, 0)
	}
	if ch.Y != (Range{}) {
		p.Y.Min, p.Y.Max = ch.Y.Min, ch.Y.Max
	} else if !logY && p.Y.Min >= 0 {
		p.Y.Min = 0
	}
	if !bars {
		p.X.Tick.Marker = valueTicks{gplot.DefaultTicks{}}
	}
	p.Y.Tick.Marker = valueTicks{gplot.DefaultTicks{}}
	if logX {
		p.X.Scale, p.X.Tick.Marker = gplot.LogScale{}, valueTicks{gplot.LogTicks{Prec: -1}}
		positiveRange(&p.X.Min, &p.X.Max)
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = gplot.LogScale{}, valueTicks{gplot.LogTicks{Prec: -1}}
		positiveRange(&p.Y.Min, &p.Y.Max)
	}
	return p
}

// valueTicks labels another ticker's major ticks as FormatValue does (40k,
// 0.25), as the notes and tables of spool bench print numbers.
type valueTicks struct{ gplot.Ticker }

// Ticks implements gonum's plot.Ticker.
func (t valueTicks) Ticks(lo, hi float64) []gplot.Tick {
	ts := t.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = FormatValue(ts[i].Value)
		}
	}
	return ts
}

// addBars draws the chart's bars as filled rectangles from the axis base
// (0, or on a logarithmic axis a power of ten below the smallest bar), with
// each bar's note above it, and names the categories along x. It reports
// whether any bar could be drawn.
func (ch *Chart) addBars(p *gplot.Plot, logY bool) bool {
	col := ch.BarColor
	if col == (color.RGBA{}) {
		col = Palette[0]
	}
	base := 0.0
	if logY {
		base = math.Inf(1)
		for _, b := range ch.Bars {
			if finite(b.Value) && b.Value > 0 {
				base = min(base, b.Value)
			}
		}
		if math.IsInf(base, 1) {
			return false
		}
		base = math.Pow(10, math.Ceil(math.Log10(base))-1) // strictly below the smallest
	}
	names := make([]string, len(ch.Bars))
	var notes plotter.XYLabels
	drawn := false
	for i, b := range ch.Bars {
		names[i] = b.Label
		if !finite(b.Value) || (logY && b.Value <= 0) {
			continue
		}
		x := float64(i)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x - barHalfWidth, Y: base}, {X: x + barHalfWidth, Y: base}, {X: x + barHalfWidth, Y: b.Value}, {X: x - barHalfWidth, Y: b.Value}})
		if err != nil {
			continue
		}
		poly.Color = col
		poly.LineStyle.Width = 0
		p.Add(poly)
		note := b.Note
		if note == "" {
			note = FormatValue(b.Value)
		}
		notes.XYs = append(notes.XYs, plotter.XY{X: x, Y: b.Value})
		notes.Labels = append(notes.Labels, note)
		drawn = true
	}
	if len(notes.XYs) > 0 {
		if l, err := plotter.NewLabels(notes); err == nil {
			for i := range l.TextStyle {
				l.TextStyle[i].XAlign = draw.XCenter
				l.TextStyle[i].YAlign = draw.YBottom
			}
			l.Offset = vg.Point{Y: px(3)}
			p.Add(l)
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(ch.Bars))-0.5
	return drawn
}

// segments splits points into runs of drawable ones: a point that is not
// drawable breaks the line.
func segments(pts []Point, drawable func(Point) bool) [][]Point {
	var out [][]Point
	var cur []Point
	for _, pt := range pts {
		if !drawable(pt) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, pt)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// positiveRange makes a logarithmic axis's range positive and non-empty.
func positiveRange(lo, hi *float64) {
	if *hi <= 0 {
		*lo, *hi = 1, 10
		return
	}
	if *lo <= 0 || *lo >= *hi {
		*lo = *hi / 10
	}
}

// noData shows "no data" in the middle of an empty chart.
func noData(p *gplot.Plot) {
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	if l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0.5, Y: 0.5}}, Labels: []string{"no data"}}); err == nil {
		l.TextStyle[0].XAlign, l.TextStyle[0].YAlign = draw.XCenter, draw.YCenter
		p.Add(l)
	}
}

// spanPlotter shades x ranges over the full height of the plot area, with
// each span's label at its top. It has no data range: spans do not widen
// the axes.
type spanPlotter struct{ spans []Span }

// Plot implements gonum's plot.Plotter.
func (s *spanPlotter) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, _ := p.Transforms(&c)
	fill := color.RGBA{0x88, 0x88, 0x88, spanFillAlpha}
	sty := p.X.Label.TextStyle
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
	for _, sp := range s.spans {
		if !finite(sp.From) || !finite(sp.To) {
			continue
		}
		x0 := max(c.Min.X, min(c.Max.X, trX(sp.From)))
		x1 := max(c.Min.X, min(c.Max.X, trX(sp.To)))
		if x1 <= x0 {
			continue
		}
		c.FillPolygon(fill, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		if sp.Label != "" {
			c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: c.Max.Y - px(4)}, sp.Label)
		}
	}
}
