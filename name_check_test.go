package spool

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNamesMatchTheirPatterns checks validQueue and validTag against
// the regular expressions their docs state, on every short string over an
// alphabet of allowed, forbidden and boundary bytes, and on lengths around
// the limits.
func TestValidNamesMatchTheirPatterns(t *testing.T) {
	queue := regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$`)
	tag := regexp.MustCompile(`^[a-zA-Z0-9_.:-]{1,64}$`)
	check := func(s string) {
		t.Helper()
		if got, want := validQueue(s), queue.MatchString(s); got != want {
			t.Errorf("validQueue(%q) = %v, want %v", s, got, want)
		}
		if got, want := validTag(s), tag.MatchString(s); got != want {
			t.Errorf("validTag(%q) = %v, want %v", s, got, want)
		}
	}
	alphabet := []string{"a", "Z", "0", "9", "_", ".", "-", ":", " ", "/", "é", "\x00", "\n", "`", "{", "@", "["}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		check(prefix)
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			walk(prefix+c, depth-1)
		}
	}
	walk("", 3)
	for _, n := range []int{63, 64, 65, 127, 128, 129} {
		for _, lead := range []string{"a", ".", "-", ":"} {
			check(lead + strings.Repeat("b", n-1))
			check(lead + strings.Repeat("b", n-2) + "\n")
		}
	}
}
