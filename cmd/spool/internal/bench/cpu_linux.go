package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// serverNames are the process names of the database servers whose CPU
// time serverCPU adds up.
var serverNames = map[string]bool{"postgres": true, "mariadbd": true, "mysqld": true}

// serverCPU is the CPU time (user and system, as /proc/PID/stat counts it,
// in clock ticks of 1/100 s) of every database server process on this
// machine: on a shared machine it includes other sessions' work, and a
// process that ended between two reads drops out.
func serverCPU() (time.Duration, bool) {
	return procCPU(func(_, _ int, name string) bool { return serverNames[name] })
}

// treeCPU is the CPU time of process root and its children (a PostgreSQL
// postmaster and its backends): a server of the caller's own, measured
// apart from every other on the machine. A backend that ended between two
// reads drops out, so measure over a span in which connections stay open.
func treeCPU(root int) (time.Duration, bool) {
	return procCPU(func(pid, ppid int, _ string) bool { return pid == root || ppid == root })
}

// childPIDs lists the processes whose parent is root.
func childPIDs(root int) []int {
	var pids []int
	forEachProc(func(pid, ppid int, _ string, _ []string) {
		if ppid == root {
			pids = append(pids, pid)
		}
	})
	return pids
}

// procCPU adds up the CPU time of the processes match selects by PID,
// parent PID and name.
func procCPU(match func(pid, ppid int, name string) bool) (time.Duration, bool) {
	var ticks int64
	found := false
	forEachProc(func(pid, ppid int, name string, f []string) {
		if !match(pid, ppid, name) {
			return
		}
		// utime and stime are fields 14 and 15 of the line.
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return
		}
		ticks += u + st
		found = true
	})
	return time.Duration(ticks) * 10 * time.Millisecond, found
}

// forEachProc calls f for every process whose /proc/PID/stat it can read,
// with the fields after the name (state first, then the parent's PID).
// A process that ends meanwhile is left out.
func forEachProc(f func(pid, ppid int, name string, fields []string)) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 1 || close < open {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
		if err != nil {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 13 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		f(pid, ppid, s[open+1:close], fields)
	}
}
