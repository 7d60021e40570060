package mysql

import (
	"context"
	"testing"

	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestKillFallbackConnectionNotPooled: when a cancelled statement's kill
// falls back (here: the statement answered, but not before the kill's look
// at the session found it idle; under load, a KILL QUERY past its 100 ms),
// the killer ends the session in the background, so its connection must
// not go back to the pool, even though the statement's result stands: the
// pool's next statement on it met the kill as "invalid connection" (a hard
// stop, then a read of the jobs, at a load of 28, 2026-12-02).
func TestKillFallbackConnectionNotPooled(t *testing.T) {
	ctx := context.Background()
	be, err := Open(ctx, testdb.MySQLDatabaseURL(testdb.NewMySQLDatabase(t), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	conn, err := be.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open := be.db.Stats().OpenConnections
	var fellBack bool
	err = conn.Raw(func(dc any) error {
		kc := dc.(*killConn)
		stmtCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, inner, err := kc.watch(stmtCtx)
		if err != nil {
			return err
		}
		_, err = kc.exec.ExecContext(inner, "DO 1", nil)
		// The context ends after the statement answered and before the
		// call saw it: the kill finds the session idle and falls back.
		cancel()
		<-w.killed
		fellBack = w.closed
		return w.end(err)
	})
	if err != nil {
		t.Fatalf("a statement that answered before its kill: %v", err)
	}
	if !fellBack {
		t.Fatal("the kill of an idle session did not fall back; the test no longer sets up its case")
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if st := be.db.Stats(); st.OpenConnections != open-1 || st.Idle != 0 {
		t.Fatalf("after the kill's fallback the connection went back to the pool (open %d, was %d; idle %d): the session the killer ends in the background would fail the next statement on it",
			st.OpenConnections, open, st.Idle)
	}
}
