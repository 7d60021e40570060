package scenarios

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
)

// probeStatements is how many round trips the speed probe sends.
const probeStatements = 2000

// probe sends probeStatements `SELECT 1` round trips to the server on one
// connection and returns the server's CPU time a statement, in µs. The work
// is the same in every run, so the figure says how fast the machine runs
// the server at that moment: a guest's speed can move by half within hours
// with no steal time shown, and figures of runs whose probes differ much
// do not compare. Its connection is the bench's own, outside the workers'.
func (e *hostsEnv) probe(ctx context.Context) (float64, error) {
	var (
		exec func() error
		done func()
	)
	if e.kind == "postgres" {
		conn, err := pgx.Connect(ctx, e.baseURL)
		if err != nil {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		done = func() { _ = conn.Close(context.Background()) }
		exec = func() error {
			_, err := conn.Exec(ctx, "SELECT 1")
			return err
		}
	} else {
		be, err := backend.Open(ctx, e.baseURL)
		if err != nil {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		my, err := bench.MySQLBackend(be)
		if err != nil {
			_ = be.Close()
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		conn, err := my.DB().Conn(ctx)
		if err != nil {
			_ = be.Close()
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		done = func() { _ = conn.Close(); _ = be.Close() }
		exec = func() error {
			_, err := conn.ExecContext(ctx, "SELECT 1")
			return err
		}
	}
	defer done()
	// The first statements warm the connection's caches and plans.
	for range 100 {
		if err := exec(); err != nil {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
	}
	cpu0 := e.serverCPU()
	for range probeStatements {
		if err := exec(); err != nil {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
	}
	return bench.PerJobUS(e.serverCPU()-cpu0, probeStatements), nil
}
