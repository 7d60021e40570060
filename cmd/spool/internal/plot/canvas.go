package plot

import (
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// anchor aligns text horizontally on its x coordinate.
type anchor uint8

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

// canvas is what the layout draws on, in pixels from the top left.
type canvas interface {
	// polyline strokes connected segments with round joins.
	polyline(pts []Point, c color.Color, width float64)
	// polygon fills a closed shape.
	polygon(pts []Point, c color.Color)
	// rect fills an axis-aligned rectangle.
	rect(x0, y0, x1, y1 float64, c color.Color)
	// text draws s with its baseline at y; vertical text reads bottom to
	// top and is anchored along the vertical.
	text(x, y float64, s string, style textStyle, a anchor, vertical bool, c color.Color)
}

// svgCanvas writes SVG elements into a buffer.
type svgCanvas struct {
	b     strings.Builder
	fonts *fontSet
}

func newSVGCanvas(w, h int, fonts *fontSet) *svgCanvas {
	c := &svgCanvas{fonts: fonts}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", w, h, w, h)
	fmt.Fprintf(&c.b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	return c
}

// String closes the document and returns it.
func (c *svgCanvas) String() string { return c.b.String() + "</svg>\n" }

// svgPaint returns the colour as #rrggbb and its opacity.
func svgPaint(col color.Color) (string, float64) {
	n := color.NRGBAModel.Convert(col).(color.NRGBA)
	return fmt.Sprintf("#%02x%02x%02x", n.R, n.G, n.B), float64(n.A) / 255
}

func svgPoints(pts []Point) string {
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", p.X, p.Y)
	}
	return b.String()
}

func (c *svgCanvas) polyline(pts []Point, col color.Color, width float64) {
	if len(pts) < 2 {
		return
	}
	paint, op := svgPaint(col)
	fmt.Fprintf(&c.b, `<polyline fill="none" stroke="%s" stroke-opacity="%.2f" stroke-width="%.1f" stroke-linejoin="round" stroke-linecap="round" points="%s"/>`+"\n",
		paint, op, width, svgPoints(pts))
}

func (c *svgCanvas) polygon(pts []Point, col color.Color) {
	if len(pts) < 3 {
		return
	}
	paint, op := svgPaint(col)
	fmt.Fprintf(&c.b, `<polygon fill="%s" fill-opacity="%.2f" points="%s"/>`+"\n", paint, op, svgPoints(pts))
}

func (c *svgCanvas) rect(x0, y0, x1, y1 float64, col color.Color) {
	paint, op := svgPaint(col)
	fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f"/>`+"\n",
		min(x0, x1), min(y0, y1), math.Abs(x1-x0), math.Abs(y1-y0), paint, op)
}

func (c *svgCanvas) text(x, y float64, s string, style textStyle, a anchor, vertical bool, col color.Color) {
	paint, _ := svgPaint(col)
	anchorName := [...]string{"start", "middle", "end"}[a]
	weight := "normal"
	if style.bold() {
		weight = "bold"
	}
	transform := ""
	if vertical {
		transform = fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, x, y)
	}
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-family="Go, Helvetica, Arial, sans-serif" font-size="%.0f" font-weight="%s" fill="%s" text-anchor="%s"%s>`,
		x, y, style.size(), weight, paint, anchorName, transform)
	_ = xml.EscapeText(&c.b, []byte(s)) // a strings.Builder never fails
	c.b.WriteString("</text>\n")
}

// rasterCanvas draws into an RGBA image.
type rasterCanvas struct {
	img   *image.RGBA
	fonts *fontSet
	z     vector.Rasterizer
}

func newRasterCanvas(w, h int, fonts *fontSet) *rasterCanvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return &rasterCanvas{img: img, fonts: fonts}
}

func (c *rasterCanvas) encode(w io.Writer) error {
	if err := png.Encode(w, c.img); err != nil {
		return fmt.Errorf("plot: write png: %w", err)
	}
	return nil
}

// fill rasterises one closed polygon with anti-aliasing, over the bounding
// box of its points only.
func (c *rasterCanvas) fill(pts []Point, col color.Color) {
	if len(pts) < 3 {
		return
	}
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, p := range pts {
		if math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.X, 0) || math.IsInf(p.Y, 0) {
			return // the layout never asks for this; draw nothing rather than garbage
		}
		x0, y0, x1, y1 = min(x0, p.X), min(y0, p.Y), max(x1, p.X), max(y1, p.Y)
	}
	box := image.Rect(int(math.Floor(x0)), int(math.Floor(y0)), int(math.Ceil(x1))+1, int(math.Ceil(y1))+1).
		Intersect(c.img.Bounds())
	if box.Empty() {
		return
	}
	c.z.Reset(box.Dx(), box.Dy())
	ox, oy := float64(box.Min.X), float64(box.Min.Y)
	c.z.MoveTo(float32(pts[0].X-ox), float32(pts[0].Y-oy))
	for _, p := range pts[1:] {
		c.z.LineTo(float32(p.X-ox), float32(p.Y-oy))
	}
	c.z.ClosePath()
	c.z.Draw(c.img, box, image.NewUniform(col), image.Point{})
}

func (c *rasterCanvas) polyline(pts []Point, col color.Color, width float64) {
	hw := width / 2
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		dx, dy := b.X-a.X, b.Y-a.Y
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		nx, ny := -dy/l*hw, dx/l*hw
		c.fill([]Point{{a.X + nx, a.Y + ny}, {b.X + nx, b.Y + ny}, {b.X - nx, b.Y - ny}, {a.X - nx, a.Y - ny}}, col)
	}
	// Round joins: a disc at every inner point closes the notches between
	// segments.
	if width >= 2 {
		for i := 1; i+1 < len(pts); i++ {
			c.fill(disc(pts[i], hw), col)
		}
	}
}

func (c *rasterCanvas) polygon(pts []Point, col color.Color) { c.fill(pts, col) }

func (c *rasterCanvas) rect(x0, y0, x1, y1 float64, col color.Color) {
	c.fill([]Point{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}, col)
}

func (c *rasterCanvas) text(x, y float64, s string, style textStyle, a anchor, vertical bool, col color.Color) {
	face := c.fonts.faces[style]
	w := c.fonts.width(s, style)
	shift := [...]float64{0, w / 2, w}[a]
	if !vertical {
		d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: face,
			Dot: fixed.P(int(math.Round(x-shift)), int(math.Round(y)))}
		d.DrawString(s)
		return
	}
	// Draw horizontally on a scratch image, then copy it rotated a quarter
	// turn anticlockwise so that it reads upwards.
	m := face.Metrics()
	asc, desc := m.Ascent.Ceil(), m.Descent.Ceil()
	tw := int(math.Ceil(w))
	tmp := image.NewRGBA(image.Rect(0, 0, tw, asc+desc))
	d := font.Drawer{Dst: tmp, Src: image.NewUniform(col), Face: face, Dot: fixed.P(0, asc)}
	d.DrawString(s)
	// After rotation, the text's start sits at y+shift-… and its baseline
	// is the vertical line through x.
	left := int(math.Round(x)) - asc
	bottom := int(math.Round(y + shift))
	rot := image.NewRGBA(image.Rect(left, bottom-tw, left+asc+desc, bottom))
	for ty := 0; ty < asc+desc; ty++ {
		for tx := 0; tx < tw; tx++ {
			rot.SetRGBA(left+ty, bottom-1-tx, tmp.RGBAAt(tx, ty))
		}
	}
	draw.Draw(c.img, rot.Bounds(), rot, rot.Bounds().Min, draw.Over)
}

// disc approximates a circle by a 16-sided polygon.
func disc(p Point, r float64) []Point {
	const n = 16
	out := make([]Point, n)
	for i := range out {
		a := 2 * math.Pi * float64(i) / n
		out[i] = Point{p.X + r*math.Cos(a), p.Y + r*math.Sin(a)}
	}
	return out
}
