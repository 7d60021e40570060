package bench

import "time"

// cpuSpan is the CPU time this process, the machine's database servers and
// the server processes of the run's own sessions had used when a measured
// span of a run began.
type cpuSpan struct {
	client    time.Duration
	clientOK  bool
	server    serverCPUSnapshot
	serverOK  bool
	sessions  func() []int
	session   serverCPUSnapshot
	sessionOK bool
}

// startCPUSpan begins a span. sessions, when not nil, lists the server
// processes of the run's own sessions (Store.sessionPIDs).
func startCPUSpan(sessions func() []int) cpuSpan {
	s := cpuSpan{sessions: sessions}
	s.client, s.clientOK = ProcessCPU()
	s.server, s.serverOK = takeServerCPU()
	if sessions != nil && s.serverOK {
		// From the same read as the server's, so that the sessions' part
		// can never exceed the whole.
		s.session, s.sessionOK = s.server.only(sessions())
	}
	return s
}

// perJob returns the CPU time used since the span began, per job in
// microseconds: by this process, by the database servers, and by the
// server processes of the run's own sessions (a session opened during the
// span counts whole). 0 stands for what was not measured, and for the
// server of SQLite, whose store runs in this process.
func (s cpuSpan) perJob(jobs int, backendName string) (client, server, session float64) {
	if jobs <= 0 {
		return 0, 0, 0
	}
	if now, ok := ProcessCPU(); ok && s.clientOK {
		client = PerJobUS(now-s.client, jobs)
	}
	if backendName == "sqlite" {
		return client, 0, 0
	}
	now, ok := takeServerCPU()
	if !ok || !s.serverOK {
		return client, 0, 0
	}
	server = PerJobUS(s.server.since(now), jobs)
	if s.sessionOK {
		if mine, ok := now.only(s.sessions()); ok {
			session = PerJobUS(s.session.since(mine), jobs)
		}
	}
	return client, server, session
}

// ServerPIDsEnv names the environment variable that, when it lists
// process IDs (comma-separated), makes takeServerCPU read those processes
// only: a server of the caller's own, measured apart from the other
// database servers of a shared machine (other sessions' PostgreSQL and
// MariaDB servers, their tests').
const ServerPIDsEnv = "SPOOL_BENCH_SERVER_PIDS"

// ServerCPUSpan is the CPU time of the machine's database server processes
// when a measured span began (see takeServerCPU: on a shared machine it
// includes other sessions' work, unless ServerPIDsEnv lists the run's
// server).
type ServerCPUSpan struct {
	start serverCPUSnapshot
	ok    bool
}

// StartServerCPU begins a ServerCPUSpan.
func StartServerCPU() ServerCPUSpan {
	s, ok := takeServerCPU()
	return ServerCPUSpan{start: s, ok: ok}
}

// PerJob is the servers' CPU time since the span began per job, in
// microseconds; 0 when it could not be read.
func (s ServerCPUSpan) PerJob(jobs int) float64 {
	now, ok := takeServerCPU()
	if !ok || !s.ok || jobs <= 0 {
		return 0
	}
	return PerJobUS(s.start.since(now), jobs)
}
