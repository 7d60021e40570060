package plot

import (
	"math"
	"strconv"
	"strings"
)

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
