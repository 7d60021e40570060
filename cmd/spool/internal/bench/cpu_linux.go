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

// procCPU adds up the CPU time of the processes match selects by PID,
// parent PID and name.
func procCPU(match func(pid, ppid int, name string) bool) (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return 0, false
	}
	var ticks int64
	found := false
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
		// After the name: state is field 3, the parent's PID 4; utime and
		// stime are 14 and 15.
		f := strings.Fields(s[close+1:])
		if len(f) < 13 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || !match(pid, ppid, s[open+1:close]) {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		ticks += u + st
		found = true
	}
	return time.Duration(ticks) * 10 * time.Millisecond, found
}
