// Package claimpick chooses which rows an optimistic claim tries to win from
// a window of candidates read in claim order.
//
// Random picks are what keep concurrent claimers from all racing for the same
// head row (as in the "Laravel queueing optimization" analysis); taking the
// priorities whole, best first, is what keeps a random pick from ever passing
// over a row of a better priority. The MySQL and PostgreSQL optimistic claims
// both pick this way.
package claimpick

import "math/rand/v2"

// Pick returns want items of window, which is in claim order (best priority
// first), at random within a priority but never passing over an item of a
// better priority: the priorities are taken whole, best first, and only the
// last one taken is sampled. priority gives an item's priority; items of one
// priority stand next to each other in window. A window of want items or
// fewer is returned as it is. Pick may reorder the items of window's last
// sampled priority in place.
func Pick[T any](window []T, want int, priority func(T) int16) []T {
	if len(window) <= want {
		return window
	}
	picked := make([]T, 0, want)
	for start := 0; len(picked) < want; {
		end := start
		for end < len(window) && priority(window[end]) == priority(window[start]) {
			end++
		}
		tier := window[start:end]
		if need := want - len(picked); len(tier) > need {
			rand.Shuffle(len(tier), func(i, j int) { tier[i], tier[j] = tier[j], tier[i] })
			tier = tier[:need]
		}
		picked = append(picked, tier...)
		start = end
	}
	return picked
}
