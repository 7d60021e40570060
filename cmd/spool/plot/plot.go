// Package plot describes the charts of spool bench (lines, optionally as
// steps or with markers; bars with notes; shaded spans; linear or
// logarithmic axes; several charts stacked under one title) and draws them
// as PNG or SVG with gonum.org/v1/plot. The bench scenarios say what to
// draw; gonum draws it.
//
// Public for the lab (the bench/lab module), which shares the spool
// command's plumbing; no compatibility promise.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Errors returned for figures and paths the package cannot draw.
var (
	// ErrFormat means a path's extension is neither .png nor .svg.
	ErrFormat = errors.New("plot: unknown image format (want a .png or .svg file)")
	// ErrEmpty means a figure has no charts.
	ErrEmpty = errors.New("plot: figure has no charts")
)

// Scale maps data values to an axis.
type Scale uint8

// Axis scales. A logarithmic axis ignores values that are not positive.
const (
	Linear Scale = iota
	Log
)

// Point is one data point.
type Point struct{ X, Y float64 }

// Line is a data series drawn as a polyline.
type Line struct {
	// Name labels the line in the legend; an empty name leaves it out.
	Name string
	// Points in drawing order. NaN and infinite values break the line.
	Points []Point
	// Step draws a horizontal then a vertical segment between points.
	Step bool
	// Markers draws a dot at each point.
	Markers bool
	// Width is the stroke width in pixels. Defaults to 2.
	Width float64
	// Color of the line. Defaults to the next colour of the palette.
	Color color.RGBA
}

// Bar is one bar of a bar chart.
type Bar struct {
	// Label names the bar under the axis.
	Label string
	// Value is the bar's height.
	Value float64
	// Note is printed above the bar. Defaults to the value, formatted.
	Note string
}

// Span shades a range of the x axis, such as a phase of a run.
type Span struct {
	// From and To bound the span in x values.
	From, To float64
	// Label is printed at the top of the span.
	Label string
}

// Range bounds an axis. The zero Range means automatic: the data's range,
// extended to include 0 for a linear y axis over non-negative data.
type Range struct{ Min, Max float64 }

// Chart is one set of axes.
type Chart struct {
	// Title is printed above the chart, on the left.
	Title string
	// XLabel and YLabel name the axes.
	XLabel, YLabel string
	// XScale and YScale are Linear unless set.
	XScale, YScale Scale
	// X and Y fix the axes' ranges; zero ranges are automatic.
	X, Y Range
	// XFromZero extends an automatic linear x range to 0, as a time axis
	// starting at the start of a run wants.
	XFromZero bool
	// Lines are drawn over spans and bars, in order.
	Lines []Line
	// Bars make a bar chart: one category per bar along the x axis, whose
	// range and scale are then ignored. Lines are still drawn, with x in
	// bar positions (0 is the first bar's centre).
	Bars []Bar
	// BarColor colours every bar. Defaults to the first palette colour.
	BarColor color.RGBA
	// Spans shade x ranges behind the data.
	Spans []Span
	// Height of the chart in pixels, title and axis labels included.
	// Defaults to 340.
	Height int
}

// Figure is a column of charts under an optional title.
type Figure struct {
	// Title is printed centred above the charts.
	Title string
	// Width in pixels. Defaults to 900.
	Width int
	// Charts are stacked top to bottom.
	Charts []*Chart
}

// Palette is the colour sequence given to lines without a colour: distinct
// for the common forms of colour blindness.
var Palette = []color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	{0x00, 0x9e, 0x73, 0xff}, // green
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0xcc, 0x79, 0xa7, 0xff}, // purple
	{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	{0x33, 0x33, 0x33, 0xff}, // near black
}

// FormatOf returns "png" or "svg" for a path by its extension (any case),
// or an error matching ErrFormat.
func FormatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		return "png", nil
	case ".svg":
		return "svg", nil
	}
	return "", fmt.Errorf("%w: %q", ErrFormat, path)
}

// Save writes the figure to path as PNG or SVG, chosen by the extension.
// Nothing is created when the extension is unknown or the figure is empty.
func (f *Figure) Save(path string) error {
	format, err := FormatOf(path)
	if err != nil {
		return err
	}
	if len(f.Charts) == 0 {
		return ErrEmpty
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if format == "png" {
		err = f.WritePNG(out)
	} else {
		err = f.WriteSVG(out)
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("plot: %w", cerr)
	}
	return err
}

// WriteSVG writes the figure as an SVG document.
func (f *Figure) WriteSVG(w io.Writer) error {
	if len(f.Charts) == 0 {
		return ErrEmpty
	}
	width, height := f.size()
	c := vgsvg.New(width, height)
	if err := f.draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plot: write svg: %w", err)
	}
	return nil
}

// WritePNG writes the figure as a PNG image.
func (f *Figure) WritePNG(w io.Writer) error {
	if len(f.Charts) == 0 {
		return ErrEmpty
	}
	width, height := f.size()
	c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pixelDPI), vgimg.UseBackgroundColor(color.White))
	if err := f.draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("plot: write png: %w", err)
	}
	return nil
}
