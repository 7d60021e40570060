package scenarios

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

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
}

// mariaStatus reads MariaDB's global status before and after a phase.
type mariaStatus struct {
	be   backend.Backend
	base map[string]int64
}

// openMariaStatus connects to the server at url.
func openMariaStatus(ctx context.Context, url string) (*mariaStatus, error) {
	be, err := backend.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := bench.MySQLBackend(be); err != nil {
		_ = be.Close()
		return nil, err
	}
	return &mariaStatus{be: be}, nil
}

// read returns the counters now.
func (m *mariaStatus) read(ctx context.Context) (map[string]int64, error) {
	my, _ := bench.MySQLBackend(m.be)
	rows, err := my.DB().QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(mariaStatusCounters, "','")+"')")
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
	base, err := m.read(ctx)
	m.base = base
	return err
}

// write appends the counters' growth since reset, per 1,000 jobs of the
// phase, to file, and resets. They are server-wide: they include the
// reads of this report and any other client of the server.
func (m *mariaStatus) write(ctx context.Context, file string, n, round int, phase string, jobs int64) error {
	now, err := m.read(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "== %d worker processes, round %d, %s of %d jobs: MariaDB's global status, growth per 1,000 jobs\n", n, round, phase, jobs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	k := 1000 / float64(max(jobs, 1))
	for _, c := range mariaStatusCounters {
		fmt.Fprintf(tw, "%.1f\t\t%s\n", float64(now[strings.ToLower(c)]-m.base[strings.ToLower(c)])*k, c)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	m.base = now
	return appendFile(file, b.String()+"\n")
}
