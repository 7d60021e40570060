package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process has used.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// serverNames are the process names of the database servers whose CPU
// time takeServerCPU reads.
var serverNames = map[string]bool{"postgres": true, "mariadbd": true, "mysqld": true}

// serverCPUSnapshot is the CPU time (user and system, as /proc/PID/stat
// counts it, in clock ticks of 1/100 s) of every database server process
// on this machine, by PID: on a shared machine it includes other
// sessions' work.
type serverCPUSnapshot map[int]int64

// takeServerCPU reads the CPU time of every database server process, or
// of the processes ServerPIDsEnv lists.
func takeServerCPU() (serverCPUSnapshot, bool) {
	s := serverCPUSnapshot{}
	only := map[int]bool{}
	for _, f := range strings.Split(os.Getenv(ServerPIDsEnv), ",") {
		if pid, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			only[pid] = true
		}
	}
	forEachProc(func(pid, _ int, name string, f []string) {
		if len(only) > 0 && !only[pid] || len(only) == 0 && !serverNames[name] {
			return
		}
		if t, ok := statTicks(f); ok {
			s[pid] = t
		}
	})
	return s, len(s) > 0
}

// only is the part of s for the processes pids; false when none of them
// is in s (none given, or a server on another machine).
func (s serverCPUSnapshot) only(pids []int) (serverCPUSnapshot, bool) {
	out := serverCPUSnapshot{}
	for _, pid := range pids {
		if t, ok := s[pid]; ok {
			out[pid] = t
		}
	}
	return out, len(out) > 0
}

// since is the CPU time the server processes of later used after s was
// taken: a process that started meanwhile counts whole, one that ended
// drops out. Unlike the difference of two sums, it cannot go negative
// when a busy process (another session's backend) exits in between.
func (s serverCPUSnapshot) since(later serverCPUSnapshot) time.Duration {
	var ticks int64
	for pid, t := range later {
		if before, ok := s[pid]; ok && before <= t {
			t -= before
		}
		ticks += t
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// statTicks is utime plus stime of a /proc/PID/stat line's fields after
// the name.
func statTicks(f []string) (int64, bool) {
	// utime and stime are fields 14 and 15 of the line.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + st, err1 == nil && err2 == nil
}

// TreeCPU is the CPU time of process root and its children (a PostgreSQL
// postmaster and its backends): a server of the caller's own, measured
// apart from every other on the machine. A backend that ended between two
// reads drops out, so measure over a span in which connections stay open.
//
// A single-threaded process's time (a PostgreSQL backend) is read in
// nanoseconds from /proc/PID/schedstat where the kernel keeps it, else in
// clock ticks from /proc/PID/stat; a process of several threads (a
// mariadbd) always in ticks: its schedstat is its first thread's alone,
// while its stat line sums every thread's, those that ended included.
// Ticks (10 ms) truncate each process's user and system time, so a span
// in which many backends start (a scale-out's first drain) or a short
// probe is under-counted (docs/benchmarks/2026-12-02b.md, h-pgpool's
// section, has the figures).
func TreeCPU(root int) (time.Duration, bool) {
	match := inTree(root)
	var sum time.Duration
	found := false
	forEachProc(func(pid, ppid int, name string, f []string) {
		if !match(pid, ppid, name) {
			return
		}
		if ns, ok := schedNS(pid); ok && singleThreaded(f) {
			sum += time.Duration(ns)
			found = true
		} else if t, ok := statTicks(f); ok {
			sum += time.Duration(t) * 10 * time.Millisecond
			found = true
		}
	})
	return sum, found
}

// singleThreaded reports whether a /proc/PID/stat line's fields after the
// name say the process has one thread (num_threads, field 20 of the line).
func singleThreaded(f []string) bool {
	return len(f) > 17 && f[17] == "1"
}

// schedNS is the time process pid has run on a CPU, in nanoseconds: the
// first field of /proc/PID/schedstat.
func schedNS(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	return v, err == nil
}

// inTree selects process root and its children.
func inTree(root int) func(pid, ppid int, name string) bool {
	return func(pid, ppid int, _ string) bool { return pid == root || ppid == root }
}

// TreeFaults is the minor page faults of process root and its children so
// far (a PostgreSQL postmaster and its backends): on a virtual machine
// whose faults are slow, what each new connection costs a server that
// maps its shared memory page by page. Like TreeCPU, a backend that ended
// between two reads drops out.
func TreeFaults(root int) (int64, bool) {
	// minflt is field 10 of the line.
	return procSum(inTree(root), func(f []string) (int64, bool) {
		v, err := strconv.ParseInt(f[7], 10, 64)
		return v, err == nil
	})
}

// ParentPID is the parent of process pid (a backend's postmaster), or 0
// when it cannot be read.
func ParentPID(pid int) int {
	parent := 0
	forEachProc(func(p, ppid int, _ string, _ []string) {
		if p == pid {
			parent = ppid
		}
	})
	return parent
}

// ChildPIDs lists the processes whose parent is root.
func ChildPIDs(root int) []int {
	var pids []int
	forEachProc(func(pid, ppid int, _ string, _ []string) {
		if ppid == root {
			pids = append(pids, pid)
		}
	})
	return pids
}

// procSum adds up value of the /proc/PID/stat fields (after the name) of
// the processes match selects; false when none had one.
func procSum(match func(pid, ppid int, name string) bool, value func(fields []string) (int64, bool)) (int64, bool) {
	var sum int64
	found := false
	forEachProc(func(pid, ppid int, name string, f []string) {
		if !match(pid, ppid, name) {
			return
		}
		if v, ok := value(f); ok {
			sum += v
			found = true
		}
	})
	return sum, found
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
