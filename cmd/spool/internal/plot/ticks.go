package plot

import (
	"math"
	"strconv"
	"strings"
)

// tick is one labelled position on an axis.
type tick struct {
	v     float64
	label string
}

// niceStep returns a step of 1, 2 or 5 times a power of ten close to span/n.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f < 1.5:
		return mag
	case f < 3.5:
		return 2 * mag
	case f < 7.5:
		return 5 * mag
	}
	return 10 * mag
}

// linearTicks returns about n ticks at multiples of a nice step within
// [lo, hi], with labels precise enough to tell them apart.
func linearTicks(lo, hi float64, n int) []tick {
	step := niceStep(hi-lo, n)
	var out []tick
	for i := math.Ceil(lo/step - 1e-9); ; i++ {
		v := i * step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		out = append(out, tick{v: v, label: formatNumber(v, step, max(math.Abs(lo), math.Abs(hi)))})
		if len(out) > 100 {
			break
		}
	}
	return out
}

// logTicks returns ticks at powers of ten in [lo, hi] (lo > 0), with 2 and 5
// times each power as well when the range spans fewer than three decades.
func logTicks(lo, hi float64) []tick {
	first, last := math.Floor(math.Log10(lo)+1e-9), math.Ceil(math.Log10(hi)-1e-9)
	mults := []float64{1}
	if last-first < 3 {
		mults = []float64{1, 2, 5}
	}
	var out []tick
	for e := first; e <= last; e++ {
		p := math.Pow(10, e)
		for _, m := range mults {
			v := m * p
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			out = append(out, tick{v: v, label: formatNumber(v, v, v)})
		}
	}
	return out
}

// formatNumber formats v for an axis, with as many decimals as a
// resolution of step needs, in thousands (k) or millions (M) when the
// axis reaches ref and the step is coarse enough.
func formatNumber(v, step, ref float64) string {
	as, ar := math.Abs(step), math.Abs(ref)
	suffix := ""
	switch {
	case ar >= 1e6 && as >= 1e5:
		v, as, suffix = v/1e6, as/1e6, "M"
	case ar >= 1e4 && as >= 1e3:
		v, as, suffix = v/1e3, as/1e3, "k"
	}
	if v == 0 {
		suffix = ""
	}
	dec := 0
	if as > 0 && as < 1 {
		dec = int(math.Ceil(-math.Log10(as) - 1e-9))
	}
	s := strconv.FormatFloat(v, 'f', min(dec, 6), 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s + suffix
}

// FormatValue formats v for a note or a label: three significant digits,
// with k or M for thousands and millions (1.23k, 45.6M, 0.0123).
func FormatValue(v float64) string {
	av := math.Abs(v)
	switch {
	case av >= 1e6:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', sigDecimals(av/1e6), 64)) + "M"
	case av >= 1e3:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', sigDecimals(av/1e3), 64)) + "k"
	case av == 0:
		return "0"
	}
	return trimZeros(strconv.FormatFloat(v, 'f', sigDecimals(av), 64))
}

// sigDecimals returns the decimals that show three significant digits of av.
func sigDecimals(av float64) int {
	if av <= 0 {
		return 0
	}
	return max(0, min(6, 2-int(math.Floor(math.Log10(av)))))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
