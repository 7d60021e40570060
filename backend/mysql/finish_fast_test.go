package mysql_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

// TestKeptCompletionsOpenNoTransaction: a batch of plain completions of
// kept jobs, with no step records, is one autocommit statement, without a
// BEGIN and COMMIT of its own. When a lease in it does not hold, the
// statement completes the others, a read names them, and only the lease
// that did not hold is rejected; a job completed under the lease already
// (an earlier write of the same outcome whose reply was lost) is left as
// it is and not called lost. The backend's pool holds one connection,
// whose session counts the statements.
func TestKeptCompletionsOpenNoTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	be := newBackend(t, url.Values{mysql.MaxConnsParam: {"1"}})
	ids, leases := claimKinds(ctx, t, be, "k", "k", "k")
	a, b, c := ids[0], ids[1], ids[2]
	finish := func(ids ...int64) []backend.LeaseRef {
		t.Helper()
		fs := make([]backend.JobFinish, len(ids))
		for i, id := range ids {
			fs[i] = backend.JobFinish{Lease: leases[id], Outcome: backend.OutcomeComplete}
		}
		r, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{Finishes: fs})
		if err != nil {
			t.Fatalf("complete %v: %v", ids, err)
		}
		return r.Rejected
	}
	state := func(id int64) (backend.State, time.Time) {
		t.Helper()
		j, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var at time.Time
		if j.FinalizedAt != nil {
			at = *j.FinalizedAt
		}
		return j.State, at
	}

	conn0, begins0, commits0 := sessionCounters(t, ctx, be)
	if rejected := finish(a); len(rejected) != 0 {
		t.Fatalf("completion of a live lease rejected %v", rejected)
	}
	conn1, begins1, commits1 := sessionCounters(t, ctx, be)
	if conn1 != conn0 {
		t.Fatalf("the pool's connection changed (%d, then %d): the test needs one session", conn0, conn1)
	}
	if begins1 != begins0 || commits1 != commits0 {
		t.Fatalf("the completion sent %d BEGIN and %d COMMIT, want none", begins1-begins0, commits1-commits0)
	}
	stA, atA := state(a)
	if stA != backend.StateCompleted || atA.IsZero() {
		t.Fatalf("job %d after its completion: %s, finalized at %v", a, stA, atA)
	}

	// c's lease is lost: a rescue and a new claim moved its fence.
	if _, err := be.DB().ExecContext(ctx, "UPDATE `"+be.Database()+"`.spool_jobs SET fence = fence + 1 WHERE id = ?", c); err != nil {
		t.Fatal(err)
	}
	if rejected := finish(b, c); !slices.Equal(rejected, []backend.LeaseRef{leases[c]}) {
		t.Fatalf("completion of %d and of %d (lease lost) rejected %v, want only %v", b, c, rejected, leases[c])
	}
	if st, _ := state(b); st != backend.StateCompleted {
		t.Fatalf("job %d beside a lost lease: %s, want completed", b, st)
	}
	if st, _ := state(c); st != backend.StateRunning {
		t.Fatalf("job %d, whose lease was lost: %s, want running", c, st)
	}

	// The same completion again: the job stays as its first write left it.
	if rejected := finish(a); len(rejected) != 0 {
		t.Fatalf("a second write of a completion applied rejected %v", rejected)
	}
	if st, at := state(a); st != backend.StateCompleted || !at.Equal(atA) {
		t.Fatalf("job %d after its completion's second write: %s, finalized at %v (first %v)", a, st, at, atA)
	}
}
