package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/spoolq/spool/backend"
)

// The operations below need a guarantee this backend does not give
// without multi-document transactions held across reads and writes (a
// flow-controlled claim reads the running jobs and takes new ones under
// one lock; a workflow's finish settles its dependents in the same write;
// a step is recorded only while its job's lease holds; a debounced key
// serialises its inserts). lungo runs such a transaction by taking its
// engine's one write token for the transaction's whole length, and a
// MongoDB server needs a replica set and retries of WriteConflict, which
// nothing here has run against. They refuse with ErrNotSupported and
// write nothing; the reads answer for a store where none of these exist.

func notSupported(op string) error {
	return fmt.Errorf("%s: %w", op, ErrNotSupported)
}

// JobInsertDebounced implements backend.Awaits: not supported.
func (b *Backend) JobInsertDebounced(context.Context, *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	return nil, notSupported("debounced insert")
}

// JobClaimFlow implements backend.Backend: not supported (flow control).
func (b *Backend) JobClaimFlow(context.Context, *backend.JobClaimFlowParams, func(backend.FlowTx) error) error {
	return notSupported("flow-controlled claim")
}

// QueueFlowUse implements backend.Backend: the running and pending jobs of
// the queue by flow key (no rate states: flow control is not supported).
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	filter := bson.D{{Key: "queue", Value: p.Queue}, {Key: "state", Value: bson.D{{Key: "$in", Value: append(pendingStates(), string(backend.StateRunning))}}}}
	cur, err := b.jobs.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "flow_key", Value: 1}, {Key: "state", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	var docs []struct {
		FlowKey string `bson:"flow_key"`
		State   string `bson:"state"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	uses := backend.FlowUses{}
	for _, d := range docs {
		if d.State == string(backend.StateRunning) {
			uses.Add(d.FlowKey, 1, 0)
		} else {
			uses.Add(d.FlowKey, 0, 1)
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	return uses.Sorted(limit), nil
}

// StepRecord implements backend.StepStore: not supported.
func (b *Backend) StepRecord(context.Context, *backend.StepRecordParams) (bool, error) {
	return false, notSupported("record step")
}

// StepRecordMany implements backend.StepStore: not supported.
func (b *Backend) StepRecordMany(context.Context, *backend.StepRecordManyParams) ([]backend.StepRecordResult, error) {
	return nil, notSupported("record steps")
}

// JobWait implements backend.StepStore: not supported.
func (b *Backend) JobWait(context.Context, *backend.JobWaitParams) (*backend.JobWaitResult, error) {
	return nil, notSupported("wait")
}

// JobSignal implements backend.StepStore: not supported.
func (b *Backend) JobSignal(context.Context, *backend.JobSignalParams) (*backend.JobSignalResult, error) {
	return nil, notSupported("signal")
}

// JobDurable implements backend.StepStore: no job has steps or signals.
func (b *Backend) JobDurable(context.Context, int64) (*backend.JobDurable, error) {
	return &backend.JobDurable{}, nil
}

// WorkflowInsert implements backend.WorkflowStore: not supported.
func (b *Backend) WorkflowInsert(context.Context, *backend.WorkflowInsertParams) (*backend.WorkflowInsertResult, error) {
	return nil, notSupported("insert workflow")
}

// WorkflowGet implements backend.WorkflowStore: there are none.
func (b *Backend) WorkflowGet(_ context.Context, id int64) (*backend.WorkflowDetail, error) {
	return nil, fmt.Errorf("get workflow %d: %w", id, backend.ErrWorkflowNotFound)
}

// WorkflowList implements backend.WorkflowStore: there are none.
func (b *Backend) WorkflowList(context.Context, *backend.WorkflowListParams) ([]*backend.WorkflowSummary, error) {
	return nil, nil
}

// WorkflowCancel implements backend.WorkflowStore: there are none.
func (b *Backend) WorkflowCancel(_ context.Context, id int64) (int, error) {
	return 0, fmt.Errorf("cancel workflow %d: %w", id, backend.ErrWorkflowNotFound)
}

// WorkflowRetry implements backend.WorkflowStore: there are none.
func (b *Backend) WorkflowRetry(_ context.Context, id int64) (int, error) {
	return 0, fmt.Errorf("retry workflow %d: %w", id, backend.ErrWorkflowNotFound)
}

// JobDependencies implements backend.WorkflowStore: no job has any.
func (b *Backend) JobDependencies(context.Context, int64) ([]backend.DependencyOutput, error) {
	return nil, nil
}

// BatchInsert implements backend.WorkflowStore: not supported.
func (b *Backend) BatchInsert(context.Context, *backend.BatchInsertParams) (*backend.BatchInsertResult, error) {
	return nil, notSupported("insert batch")
}

// BatchAdd implements backend.WorkflowStore: there are no batches.
func (b *Backend) BatchAdd(_ context.Context, p *backend.BatchAddParams) (*backend.JobInsertManyResult, error) {
	return nil, fmt.Errorf("add to batch %d: %w", p.ID, backend.ErrBatchNotFound)
}

// BatchSeal implements backend.WorkflowStore: there are no batches.
func (b *Backend) BatchSeal(_ context.Context, id int64) (*backend.Batch, error) {
	return nil, fmt.Errorf("seal batch %d: %w", id, backend.ErrBatchNotFound)
}

// BatchGet implements backend.WorkflowStore: there are no batches.
func (b *Backend) BatchGet(_ context.Context, id int64) (*backend.Batch, error) {
	return nil, fmt.Errorf("get batch %d: %w", id, backend.ErrBatchNotFound)
}

// BatchList implements backend.WorkflowStore: there are none.
func (b *Backend) BatchList(context.Context, *backend.BatchListParams) ([]*backend.Batch, error) {
	return nil, nil
}

// BatchMembers implements backend.WorkflowStore: there are no batches.
func (b *Backend) BatchMembers(_ context.Context, p *backend.BatchMembersParams) ([]*backend.JobRow, error) {
	return nil, fmt.Errorf("batch %d members: %w", p.ID, backend.ErrBatchNotFound)
}

var _ backend.Backend = (*Backend)(nil)
