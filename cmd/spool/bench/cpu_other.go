//go:build !linux

package bench

import "time"

// ProcessCPU is not measured here.
func ProcessCPU() (time.Duration, bool) { return 0, false }

// serverCPUSnapshot is not measured here.
type serverCPUSnapshot struct{}

// only is not measured here.
func (serverCPUSnapshot) only([]int) (serverCPUSnapshot, bool) { return serverCPUSnapshot{}, false }

// takeServerCPU is not measured here.
func takeServerCPU() (serverCPUSnapshot, bool) { return serverCPUSnapshot{}, false }

// since is not measured here.
func (serverCPUSnapshot) since(serverCPUSnapshot) time.Duration { return 0 }

// TreeCPU is not measured here.
func TreeCPU(int) (time.Duration, bool) { return 0, false }

// TreeFaults is not measured here.
func TreeFaults(int) (int64, bool) { return 0, false }

// ParentPID is not known here.
func ParentPID(int) int { return 0 }

// ChildPIDs is not known here.
func ChildPIDs(int) []int { return nil }
