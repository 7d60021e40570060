package spool

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// Batch is a batch's progress; see backend.Batch.
type Batch = backend.Batch

// BatchCallback is one callback job of a batch: args and options as for
// Insert. The callback's job carries its batch's id (JobRow.BatchID), so
// its handler reads the members' counts with Client.Batch and lists them
// with Client.BatchMembers.
type BatchCallback struct {
	Args JobArgs
	Opts *InsertOpts
}

// BatchOpts describe a batch: a name for people and its callbacks, each
// inserted with the batch as a waiting job and made available exactly once
// when the batch is sealed and every member is final (completed, discarded
// or cancelled), if its condition holds; one whose condition does not hold
// is deleted then.
type BatchOpts struct {
	Name string
	// OnSuccess runs when every member completed.
	OnSuccess *BatchCallback
	// OnFailure runs when at least one member was discarded or cancelled.
	OnFailure *BatchCallback
	// OnComplete runs when every member is final, however they ended.
	OnComplete *BatchCallback
	// Open leaves the batch open: BatchAdd adds members until BatchSeal,
	// and no callback runs before. Otherwise the batch is sealed at insert.
	Open bool
}

// BatchResult is an inserted batch: its id and its members' results, in
// order (a duplicate of a unique job held elsewhere is not a member).
type BatchResult struct {
	ID      int64
	Members []InsertResult
}

// InsertBatch inserts a batch with its members and callbacks in one
// transaction: all or nothing, validated first as InsertMany is.
func (c *Client) InsertBatch(ctx context.Context, opts BatchOpts, members []InsertManyParams) (*BatchResult, error) {
	return c.insertBatch(ctx, nil, opts, members)
}

// InsertBatchTx is InsertBatch inside the caller's transaction.
func (c *Client) InsertBatchTx(ctx context.Context, tx any, opts BatchOpts, members []InsertManyParams) (*BatchResult, error) {
	if tx == nil {
		return nil, fmt.Errorf("insert batch: %w: nil transaction", ErrTxType)
	}
	return c.insertBatch(ctx, tx, opts, members)
}

func (c *Client) insertBatch(ctx context.Context, tx any, opts BatchOpts, members []InsertManyParams) (*BatchResult, error) {
	rows, err := c.buildMembers(members)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	p := &backend.BatchInsertParams{Tx: tx, Name: opts.Name, Jobs: rows, Sealed: !opts.Open}
	for _, cb := range []struct {
		in  *BatchCallback
		out **backend.JobInsertParams
	}{{opts.OnSuccess, &p.Callbacks.OnSuccess}, {opts.OnFailure, &p.Callbacks.OnFailure}, {opts.OnComplete, &p.Callbacks.OnComplete}} {
		if cb.in == nil {
			continue
		}
		row, deb, err := c.buildInsert(cb.in.Args, cb.in.Opts)
		if err == nil && deb != nil {
			err = invalid("unique", nil, "a batch callback cannot be debounced")
		}
		if err != nil {
			return nil, fmt.Errorf("insert batch: callback: %w", err)
		}
		if row.UniqueKey != "" {
			return nil, fmt.Errorf("insert batch: callback: %w", invalid("unique", nil, "a batch callback cannot have a unique key (it holds none while it waits)"))
		}
		*cb.out = row
	}
	res, err := c.backend.BatchInsert(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("insert batch: %w", err)
	}
	c.afterInsert(tx, rows)
	return &BatchResult{ID: res.ID, Members: results(rows, res.IDs, res.Duplicates)}, nil
}

// BatchAdd adds members to an open batch, in one transaction; it fails
// with an error matching ErrBatchSealed once the batch is sealed.
func (c *Client) BatchAdd(ctx context.Context, id int64, members []InsertManyParams) ([]InsertResult, error) {
	return c.batchAdd(ctx, nil, id, members)
}

// BatchAddTx is BatchAdd inside the caller's transaction.
func (c *Client) BatchAddTx(ctx context.Context, tx any, id int64, members []InsertManyParams) ([]InsertResult, error) {
	if tx == nil {
		return nil, fmt.Errorf("add to batch %d: %w: nil transaction", id, ErrTxType)
	}
	return c.batchAdd(ctx, tx, id, members)
}

func (c *Client) batchAdd(ctx context.Context, tx any, id int64, members []InsertManyParams) ([]InsertResult, error) {
	rows, err := c.buildMembers(members)
	if err != nil {
		return nil, fmt.Errorf("add to batch %d: %w", id, err)
	}
	res, err := c.backend.BatchAdd(ctx, &backend.BatchAddParams{Tx: tx, ID: id, Jobs: rows})
	if err != nil {
		return nil, err
	}
	c.afterInsert(tx, rows)
	return results(rows, res.IDs, res.Duplicates), nil
}

// ErrBatchSealed: BatchAdd on a sealed batch.
var ErrBatchSealed = backend.ErrBatchSealed

// ErrBatchNotFound: no batch has the given id.
var ErrBatchNotFound = backend.ErrBatchNotFound

// BatchSeal seals an open batch: it takes no more members, and its
// callbacks run once every member is final (at once if they all are).
// Sealing a sealed batch changes nothing.
func (c *Client) BatchSeal(ctx context.Context, id int64) (*Batch, error) {
	return c.backend.BatchSeal(ctx, id)
}

// Batch returns a batch's progress: members by final state and its
// callbacks.
func (c *Client) Batch(ctx context.Context, id int64) (*Batch, error) {
	return c.backend.BatchGet(ctx, id)
}

// Batches lists batches, newest first, limit at a time (0: 100) before the
// id beforeID (0: from the newest).
func (c *Client) Batches(ctx context.Context, beforeID int64, limit int) ([]*Batch, error) {
	return c.backend.BatchList(ctx, &backend.BatchListParams{BeforeID: beforeID, Limit: limit})
}

// BatchMembers lists a batch's members in id order, limit at a time (0:
// 100) after the id afterID.
func (c *Client) BatchMembers(ctx context.Context, id, afterID int64, limit int) ([]*JobRow, error) {
	return c.backend.BatchMembers(ctx, &backend.BatchMembersParams{ID: id, AfterID: afterID, Limit: limit})
}

// buildMembers validates members as InsertMany does.
func (c *Client) buildMembers(members []InsertManyParams) ([]*backend.JobInsertParams, error) {
	rows := make([]*backend.JobInsertParams, len(members))
	seen := map[string]bool{}
	for i, m := range members {
		row, deb, err := c.buildInsert(m.Args, m.InsertOpts)
		if err == nil && deb != nil {
			err = invalid("unique", nil, "a batch member cannot be debounced")
		}
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		if row.UniqueKey != "" {
			if seen[row.UniqueKey] {
				return nil, fmt.Errorf("job %d: %w", i, invalid("unique", nil, "a unique key repeated within one batch call"))
			}
			seen[row.UniqueKey] = true
		}
		rows[i] = row
	}
	return rows, nil
}

// afterInsert wakes local producers for jobs inserted outside a caller's
// transaction and tells observers.
func (c *Client) afterInsert(tx any, rows []*backend.JobInsertParams) {
	if tx == nil {
		c.engine.WakeInserted(rows)
	}
	c.observers.inserted(rows)
}

func results(rows []*backend.JobInsertParams, ids []int64, dups []bool) []InsertResult {
	out := make([]InsertResult, len(rows))
	for i, r := range rows {
		out[i] = InsertResult{ID: ids[i], Kind: r.Kind, Queue: r.Queue}
		if dups != nil {
			out[i].Duplicate = dups[i]
		}
	}
	return out
}

// BatchRetry retries a batch's discarded members, as JobRetry does each:
// available now with a fresh set of attempts. It reads the members a page
// at a time and changes each in its own write; a member another caller
// changed meanwhile is left alone, one whose unique key a newer job holds
// is counted in UniqueConflicts. The batch's counts and callbacks are not
// reopened: a batch is settled once (its callbacks ran, or will run,
// exactly once), and a retried member's new outcome is not counted in it.
// It fails with an error matching ErrBatchNotFound when there is no such
// batch; on another error, the result counts what was retried before it.
func (c *Client) BatchRetry(ctx context.Context, id int64) (BulkResult, error) {
	var res BulkResult
	if _, err := c.backend.BatchGet(ctx, id); err != nil {
		return res, fmt.Errorf("retry batch %d: %w", id, err)
	}
	const page = 500
	var after int64
	for {
		members, err := c.backend.BatchMembers(ctx, &backend.BatchMembersParams{ID: id, AfterID: after, Limit: page})
		if err != nil {
			return res, fmt.Errorf("retry batch %d: %d retried, then: %w", id, res.Changed, err)
		}
		for _, m := range members {
			if m.State != JobStateDiscarded {
				continue
			}
			if _, err := c.JobRetry(ctx, m.ID); res.countRetry(err) != nil {
				return res, fmt.Errorf("retry batch %d: %d retried, then: %w", id, res.Changed, err)
			}
		}
		if len(members) < page {
			break
		}
		after = members[len(members)-1].ID
	}
	return res, nil
}
