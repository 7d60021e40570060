package plot

import (
	"fmt"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// textStyle is one of the few text styles a figure uses.
type textStyle uint8

const (
	styleLabel       textStyle = iota // ticks, axis labels, legend, notes
	styleChartTitle                   // a chart's title
	styleFigureTitle                  // the figure's title
)

// size returns the style's font size in pixels.
func (s textStyle) size() float64 {
	switch s {
	case styleChartTitle:
		return 14
	case styleFigureTitle:
		return 17
	}
	return 12
}

// bold reports whether the style uses the bold face.
func (s textStyle) bold() bool { return s != styleLabel }

// The parsed fonts are shared; faces are not safe for concurrent use, so
// each render makes its own.
var (
	parseOnce           sync.Once
	regularFont, boldFn *opentype.Font
	parseErr            error
)

func parseFonts() {
	regularFont, parseErr = opentype.Parse(goregular.TTF)
	if parseErr == nil {
		boldFn, parseErr = opentype.Parse(gobold.TTF)
	}
	if parseErr != nil {
		parseErr = fmt.Errorf("plot: parse font: %w", parseErr)
	}
}

// fontSet holds one face per text style, for one render.
type fontSet struct {
	faces map[textStyle]font.Face
}

func newFontSet() (*fontSet, error) {
	parseOnce.Do(parseFonts)
	if parseErr != nil {
		return nil, parseErr
	}
	fs := &fontSet{faces: map[textStyle]font.Face{}}
	for _, s := range []textStyle{styleLabel, styleChartTitle, styleFigureTitle} {
		f := regularFont
		if s.bold() {
			f = boldFn
		}
		face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: s.size(), DPI: 72, Hinting: font.HintingFull})
		if err != nil {
			return nil, fmt.Errorf("plot: font face: %w", err)
		}
		fs.faces[s] = face
	}
	return fs, nil
}

// width returns the advance of s in pixels.
func (fs *fontSet) width(s string, style textStyle) float64 {
	return fixedToFloat(font.MeasureString(fs.faces[style], s))
}

// ascent returns the height of capitals above the baseline, roughly, for
// centring text vertically.
func (fs *fontSet) ascent(style textStyle) float64 {
	return 0.72 * style.size()
}

func fixedToFloat(v fixed.Int26_6) float64 { return float64(v) / 64 }
