//go:build !linux

package bench

import "time"

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }

// serverCPU is not measured here.
func serverCPU() (time.Duration, bool) { return 0, false }

// treeCPU is not measured here.
func treeCPU(int) (time.Duration, bool) { return 0, false }

// childPIDs is not known here.
func childPIDs(int) []int { return nil }
