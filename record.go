package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/engine"
)

// MaxOutputBytes limits a job's encoded output.
const MaxOutputBytes = 1 << 20

// ErrNotInJob is returned by RecordOutput and UpdateMetadata called with a
// context that is not a running job's (the one Work receives, or one
// derived from it).
var ErrNotInJob = errors.New("not a running job's context")

// RecordOutput stores v, encoded as JSON (at most MaxOutputBytes), as the
// output of the job whose handler's context ctx is, replacing any output
// recorded before. It is written at once, under the job's lease, so it is
// kept whatever the run's outcome: JobGet, spool jobs show and the
// dashboard return it. It fails with ErrLeaseLost when the job's lease no
// longer holds (cancelled, or rescued after a stall), and with an
// *InvalidJobError for output that does not encode or is too large.
func RecordOutput(ctx context.Context, v any) error {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return fmt.Errorf("record output: %w", ErrNotInJob)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record output of job %d: %w", run.ID(), invalid("output", nil, "output does not encode to JSON: %v", err))
	}
	if len(out) > MaxOutputBytes {
		return fmt.Errorf("record output of job %d: %w", run.ID(), invalid("output", nil, "output of %d bytes, over the limit of %d", len(out), MaxOutputBytes))
	}
	if why := checkStorableJSON(out); why != "" {
		return fmt.Errorf("record output of job %d: %w", run.ID(), invalid("output", nil, "output must not %s", why))
	}
	return run.Record(ctx, out, nil)
}

// JobStartedAt returns when this process started the handler whose context
// ctx is (by the local clock): the moment just after its last check that at
// least half the job's lease was left. A handler that reads the clock itself
// may see a later time (a process paused in between); the lease guarantees
// of docs/guarantees.md are about this one. ok is false outside a job.
func JobStartedAt(ctx context.Context) (at time.Time, ok bool) {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return time.Time{}, false
	}
	return run.StartedAt(), true
}

// UpdateMetadata merges patch into the metadata of the job whose handler's
// context ctx is: each key replaces the key of that name, and a nil value
// removes it. It is written at once, under the job's lease, so that others
// can follow the job while it runs (progress, the step it is at). Errors
// are those of RecordOutput; the merged metadata is limited like args.
func UpdateMetadata(ctx context.Context, patch map[string]any) error {
	run, ok := engine.RunFrom(ctx)
	if !ok {
		return fmt.Errorf("update metadata: %w", ErrNotInJob)
	}
	return run.Record(ctx, nil, func(current json.RawMessage) (json.RawMessage, error) {
		fields := map[string]json.RawMessage{}
		if len(current) > 0 {
			if err := json.Unmarshal(current, &fields); err != nil {
				return nil, fmt.Errorf("update metadata of job %d: stored metadata is not an object: %w", run.ID(), err)
			}
		}
		for k, v := range patch {
			if v == nil {
				delete(fields, k)
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("update metadata of job %d: %w", run.ID(), invalid("metadata", nil, "metadata key %q does not encode to JSON: %v", k, err))
			}
			fields[k] = b
		}
		meta, err := json.Marshal(fields)
		if err != nil {
			return nil, fmt.Errorf("update metadata of job %d: %w", run.ID(), err)
		}
		if len(meta) > DefaultMaxArgsBytes {
			return nil, fmt.Errorf("update metadata of job %d: %w", run.ID(), invalid("metadata", nil, "metadata of %d bytes, over the limit of %d", len(meta), DefaultMaxArgsBytes))
		}
		if why := checkStorableJSON(meta); why != "" {
			return nil, fmt.Errorf("update metadata of job %d: %w", run.ID(), invalid("metadata", nil, "metadata must not %s", why))
		}
		return meta, nil
	})
}
