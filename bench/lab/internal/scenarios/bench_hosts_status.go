package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// mariaStatusCounters are the global status counters lab hosts --statements
// reports on MariaDB, which has no pg_stat_statements: statements by kind,
// InnoDB's row reads and writes, its lock waits and its log flushes.
var mariaStatusCounters = []string{
	"Questions", "Com_begin", "Com_commit", "Com_select", "Com_insert", "Com_update", "Com_delete",
	"Handler_read_key", "Handler_read_next", "Innodb_rows_read", "Innodb_rows_updated",
	"Innodb_row_lock_waits", "Innodb_row_lock_time", "Innodb_deadlocks",
	"Innodb_log_writes", "Innodb_os_log_fsyncs", "Innodb_data_fsyncs", "Created_tmp_tables",
	"Innodb_buffer_pool_read_requests", "Handler_update", "Handler_write", "Handler_delete", "Bytes_received", "Bytes_sent",
}

// mariaPurgeMetrics are the INNODB_METRICS counters that lab hosts
// --statements enables on its own server and reports beside the status
// counters: how many delete-marked index entries the purge removed (a
// claim's and a completion's old entries) and how often it ran; the
// record locks asked for and the lock structures created (one a page and
// transaction, unless locks conflict); commits by kind.
var mariaPurgeMetrics = []string{"purge_del_mark_records", "purge_upd_exist_or_extern_records", "purge_invoked", "purge_undo_log_pages",
	"lock_rec_lock_requests", "lock_rec_lock_created", "trx_rw_commits", "trx_ro_commits", "trx_nl_ro_commits", "trx_rollbacks"}

// mariaStatus reads MariaDB's global status before and after a phase.
type mariaStatus struct {
	be   backend.Backend
	base map[string]int64
	// hist samples InnoDB's history list length (undo logs not yet
	// purged) through a phase: the delete-marked entries a claim's scan
	// of the queue's head may step over wait in it for the purge.
	hist *historySampler
}

// historySampler reads Innodb_history_list_length every 20 ms until
// stopped.
type historySampler struct {
	stop chan struct{}
	done chan struct{}
	n    int
	sum  int64
	max  int64
}

func (m *mariaStatus) startSampler() {
	my, _ := bench.MySQLBackend(m.be)
	h := &historySampler{stop: make(chan struct{}), done: make(chan struct{})}
	m.hist = h
	go func() {
		defer close(h.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			var v int64
			if err := my.DB().QueryRow("SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'").Scan(&v); err == nil {
				h.n++
				h.sum += v
				h.max = max(h.max, v)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// stopSampler ends the phase's sampling and returns its mean and most.
func (m *mariaStatus) stopSampler() (mean float64, most int64) {
	h := m.hist
	if h == nil {
		return 0, 0
	}
	close(h.stop)
	<-h.done
	m.hist = nil
	return float64(h.sum) / float64(max(h.n, 1)), h.max
}

// openMariaStatus connects to the server at url.
func openMariaStatus(ctx context.Context, url string) (*mariaStatus, error) {
	be, err := backend.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	my, err := bench.MySQLBackend(be)
	if err != nil {
		_ = be.Close()
		return nil, err
	}
	// The bench's own server: its purge counters are off by default.
	if _, err := my.DB().ExecContext(ctx, "SET GLOBAL innodb_monitor_enable = 'module_purge'"); err != nil {
		_ = be.Close()
		return nil, fmt.Errorf("enable the purge counters: %w", err)
	}
	for _, module := range []string{"module_lock", "module_trx"} {
		if _, err := my.DB().ExecContext(ctx, "SET GLOBAL innodb_monitor_enable = '"+module+"'"); err != nil {
			_ = be.Close()
			return nil, fmt.Errorf("enable the %s counters: %w", module, err)
		}
	}
	return &mariaStatus{be: be}, nil
}

// read returns the counters now.
func (m *mariaStatus) read(ctx context.Context) (map[string]int64, error) {
	my, _ := bench.MySQLBackend(m.be)
	rows, err := my.DB().QueryContext(ctx, "SELECT variable_name, variable_value FROM information_schema.GLOBAL_STATUS WHERE variable_name IN ('"+strings.Join(mariaStatusCounters, "','")+"')"+
		" UNION ALL SELECT name, count FROM information_schema.INNODB_METRICS WHERE name IN ('"+strings.Join(mariaPurgeMetrics, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("read the global status: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			v    int64
		)
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("read the global status: %w", err)
		}
		out[strings.ToLower(name)] = v
	}
	return out, rows.Err()
}

// reset takes the counters a phase's figures are counted from.
func (m *mariaStatus) reset(ctx context.Context) error {
	m.stopSampler()
	base, err := m.read(ctx)
	m.base = base
	m.startSampler()
	return err
}

// write appends the counters' growth since reset, per 1,000 jobs of the
// phase, to file, and resets. They are server-wide: they include the
// reads of this report and any other client of the server.
func (m *mariaStatus) write(ctx context.Context, file string, n, round int, phase string, jobs int64) error {
	mean, most := m.stopSampler()
	now, err := m.read(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "== %d worker processes, round %d, %s of %d jobs: MariaDB's global status, growth per 1,000 jobs\n", n, round, phase, jobs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	k := 1000 / float64(max(jobs, 1))
	for _, c := range append(slices.Clone(mariaStatusCounters), mariaPurgeMetrics...) {
		fmt.Fprintf(tw, "%.1f\t\t%s\n", float64(now[strings.ToLower(c)]-m.base[strings.ToLower(c)])*k, c)
	}
	fmt.Fprintf(tw, "%.0f\t\thistory list length, mean of the phase\n", mean)
	fmt.Fprintf(tw, "%d\t\thistory list length, most\n", most)
	if err := tw.Flush(); err != nil {
		return err
	}
	m.base = now
	m.startSampler()
	return appendFile(file, b.String()+"\n")
}
