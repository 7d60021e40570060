package sqlite

import (
	"database/sql"
	"encoding/json"

	"github.com/spoolq/spool/backend"
)

// claimColumns is what a claim returns, in scanClaimed's order: the columns
// the claim does not know. The queue, the state (running), the lease and
// the attempt time are the claim's own parameters, so they are not copied
// out of SQLite for every row; a running job waits for nothing, so neither
// are wait_kind and deps_left. A workflow task or batch member needs its
// workflow and batch (DependencyOutput, a callback's batch).
const claimColumns = `id, kind, args, priority, run_at, attempt, max_attempts, fence, created_at, finalized_at,
  errors, tags, metadata, coalesce(unique_key, ''), coalesce(unique_states, 0), output, coalesce(flow_key, ''),
  has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)`

// claimed is what a claim knows of every row it takes.
type claimed struct {
	queue, claimID string
	now, leaseUS   int64
}

// collectClaimed reads the rows of a claim statement (claimColumns) and
// closes rows; the JSON columns are decoded later, out of the write lock
// (rawJob.decode). Kinds are interned: a batch usually holds few.
func collectClaimed(rows *sql.Rows, c claimed) ([]*rawJob, error) {
	defer rows.Close()
	var (
		out                          []*rawJob
		block                        []rawJob
		kind, tags, meta             sql.RawBytes
		id, prio, runAt, att, maxAtt int64
		fence, created, uniqueStates int64
		finalized                    sql.NullInt64
		kinds                        = map[string]string{}
		leasedUntil                  = fromMicros(c.now + c.leaseUS)
		attemptedAt                  = fromMicros(c.now)
	)
	for rows.Next() {
		if len(block) == 0 {
			// Rows are allocated in blocks, not one by one.
			block = make([]rawJob, min(max(len(out), 16), 1024))
		}
		r := &block[0]
		block = block[1:]
		j := &r.j
		var args []byte
		if err := rows.Scan(&id, &kind, &args, &prio, &runAt, &att, &maxAtt, &fence, &created, &finalized,
			&r.errs, &tags, &meta, &j.UniqueKey, &uniqueStates, &r.out, &j.FlowKey,
			&j.HasDependents, &j.WorkflowID, &j.WorkflowTask, &j.BatchID); err != nil {
			return nil, err
		}
		k, ok := kinds[string(kind)]
		if !ok {
			k = string(kind)
			kinds[k] = k
		}
		j.ID, j.Queue, j.Kind, j.Args = id, c.queue, k, json.RawMessage(args)
		j.State = backend.StateRunning
		j.Priority, j.Attempt, j.MaxAttempts, j.Fence = int16(prio), int16(att), int16(maxAtt), int32(fence)
		j.RunAt, j.CreatedAt = fromMicros(runAt), fromMicros(created)
		j.UniqueStates = backend.UniqueStates(uniqueStates)
		r.leasedUntil, r.attemptedAt = leasedUntil, attemptedAt
		j.LeasedUntil, j.AttemptedAt, j.LeasedBy = &r.leasedUntil, &r.attemptedAt, c.claimID
		j.FinalizedAt = fromNullMicros(finalized)
		r.tags, r.meta = constOr(tags, "[]"), constOr(meta, "{}")
		out = append(out, r)
	}
	return out, rows.Err()
}

// constOr returns b as a string, without a copy when it is the common value
// c (an empty JSON array or object).
func constOr(b []byte, c string) string {
	if string(b) == c {
		return c
	}
	return string(b)
}
