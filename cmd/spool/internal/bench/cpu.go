package bench

import "time"

// cpuSpan is the CPU time this process and the machine's database servers
// had used when a measured span of a run began.
type cpuSpan struct {
	client   time.Duration
	clientOK bool
	server   serverCPUSnapshot
	serverOK bool
}

// startCPUSpan begins a span.
func startCPUSpan() cpuSpan {
	s := cpuSpan{}
	s.client, s.clientOK = processCPU()
	s.server, s.serverOK = takeServerCPU()
	return s
}

// perJob returns the CPU time used since the span began, per job in
// microseconds, by this process and by the database servers; 0 for what
// was not measured, and for the server of SQLite, whose store runs in this
// process.
func (s cpuSpan) perJob(jobs int, backendName string) (client, server float64) {
	if jobs <= 0 {
		return 0, 0
	}
	if now, ok := processCPU(); ok && s.clientOK {
		client = perJobUS(now-s.client, jobs)
	}
	if now, ok := takeServerCPU(); ok && s.serverOK && backendName != "sqlite" {
		server = perJobUS(s.server.since(now), jobs)
	}
	return client, server
}
