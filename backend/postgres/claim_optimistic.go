package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/claimpick"
)

// optimisticRounds bounds the window reads of one optimistic claim.
const optimisticRounds = 8

// candidate is one row of the optimistic strategy's window.
type candidate struct {
	id       int64
	fence    int32
	priority int16
}

// claimOptimistic reads the queue's head (Max + ClaimWindow rows) without
// locks, picks Max at random (never passing over a better priority), and
// claims them with one UPDATE checked against each row's fence, skipping
// rows another transaction holds locked; RETURNING gives the rows won. Rounds repeat, up to optimisticRounds, until it holds
// Max rows or the head is exhausted. For comparison with the MySQL backend;
// the pessimistic claim is the default.
func (b *Backend) claimOptimistic(ctx context.Context, p *backend.JobClaimParams) ([]*backend.JobRow, error) {
	var won []*backend.JobRow
	for round := 0; round < optimisticRounds && len(won) < p.Max; round++ {
		want := p.Max - len(won)
		window, err := b.readWindow(ctx, p.Queue, want+b.window)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: %w", err)
		}
		if len(window) == 0 {
			break
		}
		picked := claimpick.Pick(window, want, func(c candidate) int16 { return c.priority })
		slices.SortFunc(picked, func(a, b candidate) int { return int(a.id - b.id) })
		ids := make([]int64, len(picked))
		fences := make([]int32, len(picked))
		for i, c := range picked {
			ids[i], fences[i] = c.id, c.fence
		}
		var got []*backend.JobRow
		err = b.queryInTx(ctx, "BEGIN", func(rows pgx.Rows) (err error) {
			got, err = collectJobs(rows)
			return err
		}, b.sql.optimisticClaim, ids, fences, micros(p.Lease), p.ClaimID)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: %w", err)
		}
		won = append(won, got...)
		if len(got) == len(picked) && len(window) < want+b.window {
			break // won everything picked, and the head had no more to offer
		}
	}
	b.placed.add(won) // claimed in place: finishes go straight there
	b.dependents.addDependents(won)
	slices.SortFunc(won, func(a, b *backend.JobRow) int {
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return won, nil
}

// readWindow reads up to n due pending rows of a queue in claim order,
// without locks, steered to the ordered index as the pessimistic claim is.
func (b *Backend) readWindow(ctx context.Context, queue string, n int) ([]candidate, error) {
	var window []candidate
	err := b.queryInTx(ctx, "BEGIN", func(rows pgx.Rows) (err error) {
		window, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
			var c candidate
			err := r.Scan(&c.id, &c.fence, &c.priority)
			return c, err
		})
		return err
	}, b.sql.optimisticWindow, queue, n)
	return window, err
}
