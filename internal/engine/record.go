package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/backend"
)

// Run is the running job a handler's context carries, so that the handler
// can record output and metadata under the job's lease.
type Run struct {
	be    backend.Backend
	lease backend.LeaseRef
	// mu orders the handler's records: each writes the metadata as the
	// last one left it.
	mu       sync.Mutex
	metadata json.RawMessage
	// startedAt is when the executor started the handler, just after its
	// last check that at least half the lease was left.
	startedAt time.Time
	// durable is the root package's state of the run's durable steps
	// (durable.go), made on first use.
	durableOnce sync.Once
	durable     any
	hasDurable  atomic.Bool // durable is set
}

type runKey struct{}

// RunFrom returns the run a handler's context carries.
func RunFrom(ctx context.Context) (*Run, bool) {
	r, ok := ctx.Value(runKey{}).(*Run)
	return r, ok
}

// ID is the running job's id.
func (r *Run) ID() int64 { return r.lease.ID }

// StartedAt is when the executor started the handler (the local clock),
// just after its last check of the lease.
func (r *Run) StartedAt() time.Time { return r.startedAt }

// Record writes output (when not nil) and the metadata that update makes of
// the current one (when update is not nil), under the job's lease. It
// returns an error matching ErrLeaseLost when the lease no longer holds.
func (r *Run) Record(ctx context.Context, output json.RawMessage, update func(current json.RawMessage) (json.RawMessage, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var meta json.RawMessage
	if update != nil {
		var err error
		if meta, err = update(slices.Clone(r.metadata)); err != nil {
			return err
		}
	}
	ok, err := r.be.JobRecord(ctx, &backend.JobRecordParams{Lease: r.lease, Output: output, Metadata: meta})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("record job %d: %w", r.lease.ID, ErrLeaseLost)
	}
	if meta != nil {
		r.metadata = meta
	}
	return nil
}
