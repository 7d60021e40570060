package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// marker is a colour no other part of a figure uses.
var marker = color.RGBA{0xff, 0x00, 0xff, 0xff}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]string{"a.png": "png", "dir/B.SVG": "svg", "x.Png": "png"} {
		if got, err := FormatOf(path); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"a.gif", "plot", "a.png.txt", ""} {
		if _, err := FormatOf(path); !errors.Is(err, ErrFormat) {
			t.Errorf("FormatOf(%q): error %v, want ErrFormat", path, err)
		}
	}
}

func TestSaveRefusesWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	fig := &Figure{Charts: []*Chart{{Lines: []Line{{Points: []Point{{0, 0}, {1, 1}}}}}}}
	if err := fig.Save(filepath.Join(dir, "out.gif")); !errors.Is(err, ErrFormat) {
		t.Errorf("Save to .gif: %v, want ErrFormat", err)
	}
	if err := (&Figure{}).Save(filepath.Join(dir, "out.png")); !errors.Is(err, ErrEmpty) {
		t.Errorf("Save of an empty figure: %v, want ErrEmpty", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused saves created %d files", len(entries))
	}
}

// TestPNGDrawsLineWhereData is: a horizontal line at y = 5 on a fixed 0..10
// axis lands as one thin horizontal band half-way down the plot area,
// across most of the width.
func TestPNGDrawsLineWhereData(t *testing.T) {
	fig := &Figure{Width: 600, Charts: []*Chart{{
		Height: 400, Y: Range{Min: 0, Max: 10},
		Lines: []Line{{Points: []Point{{0, 5}, {10, 5}}, Color: marker, Width: 2}},
	}}}
	var buf bytes.Buffer
	if err := fig.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 600 || b.Dy() != 400 {
		t.Fatalf("size %v, want 600×400", b.Size())
	}
	minX, maxX, minY, maxY := b.Max.X, -1, b.Max.Y, -1
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == 0xff && g>>8 == 0 && bl>>8 == 0xff {
				minX, maxX, minY, maxY = min(minX, x), max(maxX, x), min(minY, y), max(maxY, y)
			}
		}
	}
	if maxX < 0 {
		t.Fatal("the line's colour is nowhere in the image")
	}
	if maxY-minY > 3 {
		t.Errorf("line spans rows %d..%d, want a band of at most 4 rows", minY, maxY)
	}
	if maxX-minX < 450 {
		t.Errorf("line spans columns %d..%d, want most of the 600 px width", minX, maxX)
	}
	// The plot area runs from about 34 px (header) to about 374 px (axis):
	// y = 5 is near its middle.
	if mid := (minY + maxY) / 2; mid < 170 || mid > 230 {
		t.Errorf("line at row %d, want near the middle of the plot area", mid)
	}
}

// TestLinesClipToFixedRange checks that data outside a fixed range is cut
// at the plot area rather than drawn over the axes and labels.
func TestLinesClipToFixedRange(t *testing.T) {
	fig := &Figure{Width: 500, Charts: []*Chart{{
		Height: 300, X: Range{Min: 0, Max: 10}, Y: Range{Min: 0, Max: 10},
		Lines: []Line{{Points: []Point{{-100, 5}, {100, 5}}, Color: marker}},
	}}}
	var buf bytes.Buffer
	if err := fig.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for y := 0; y < 300; y++ {
		for _, x := range []int{0, 1, 2, 497, 498, 499} {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 == 0xff && g>>8 == 0 && b>>8 == 0xff {
				t.Fatalf("line drawn at the image edge (%d, %d), outside the plot area", x, y)
			}
		}
	}
}

// svgElements parses an SVG document and counts its elements by name; it
// fails the test if the document is not well-formed XML.
func svgElements(t *testing.T, doc string) (map[string]int, []string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	counts := map[string]int{}
	var texts []string
	inText := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			counts[v.Name.Local]++
			inText = v.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(v))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return counts, texts
}

func TestSVGIsWellFormedAndEscaped(t *testing.T) {
	fig := &Figure{Title: `p99 < 10 ms & "fast"`, Charts: []*Chart{
		{
			Title: "CDF", XLabel: "latency (ms)", YLabel: "fraction", XScale: Log,
			Lines: []Line{{Name: "a<b", Points: []Point{{0.1, 0}, {1, 0.5}, {10, 1}, {math.NaN(), 1}, {-1, 1}}}},
			Spans: []Span{{From: 1, To: 2, Label: "held"}},
		},
		{Title: "bars", Bars: []Bar{{Label: "10,000", Value: 5}, {Label: "a long label that wraps", Value: 0}}},
	}}
	var buf bytes.Buffer
	if err := fig.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	counts, texts := svgElements(t, buf.String())
	if counts["svg"] != 1 || counts["path"] < 5 {
		t.Errorf("elements %v: want one svg and paths for the lines, bars and span", counts)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{`p99 < 10 ms & "fast"`, "a<b", "held", "CDF", "fraction", "10,000", "1", "10"} {
		if !strings.Contains(all, want) {
			t.Errorf("texts %q lack %q", all, want)
		}
	}
}

func TestEmptyChartSaysNoData(t *testing.T) {
	fig := &Figure{Charts: []*Chart{{Title: "nothing", YScale: Log, Lines: []Line{{Points: []Point{{1, 0}, {2, -3}}}}}}}
	var buf bytes.Buffer
	if err := fig.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	if _, texts := svgElements(t, buf.String()); !strings.Contains(strings.Join(texts, "|"), "no data") {
		t.Errorf("a chart with nothing to show on a log axis should say so: %q", texts)
	}
	buf.Reset()
	if err := fig.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Fatal(err)
	}
}

// TestLogBarsFromBase checks bars on a logarithmic axis (as the reorder
// histogram draws them): every bar with a positive value is drawn, from a
// base below the smallest, and a zero bar is left out rather than breaking
// the axis.
func TestLogBarsFromBase(t *testing.T) {
	fig := &Figure{Width: 400, Charts: []*Chart{{
		Height: 300, YScale: Log, BarColor: marker,
		Bars: []Bar{{Label: "0", Value: 1}, {Label: "1", Value: 0}, {Label: "2–3", Value: 1e4}},
	}}}
	var buf bytes.Buffer
	if err := fig.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Columns holding the bar colour, grouped into bars.
	var cols []int
	for x := 0; x < 400; x++ {
		for y := 0; y < 300; y++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 == 0xff && g>>8 == 0 && b>>8 == 0xff {
				cols = append(cols, x)
				break
			}
		}
	}
	groups := 0
	for i, x := range cols {
		if i == 0 || x != cols[i-1]+1 {
			groups++
		}
	}
	if groups != 2 {
		t.Errorf("found %d bars, want 2 (the zero bar left out)", groups)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1: "1", 0.012345: "0.0123", 999: "999", 1234: "1.23k", 45_600_000: "45.6M", -2500: "-2.5k"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
