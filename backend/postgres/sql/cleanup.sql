-- Cleanup: $1..$3 are ages in microseconds for completed, discarded
-- and cancelled rows; 0 keeps that state.
WITH doomed AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND $1::bigint > 0 AND finalized_at < now() - $1::bigint * interval '1 microsecond')
      OR (state = 'discarded' AND $2::bigint > 0 AND finalized_at < now() - $2::bigint * interval '1 microsecond')
      OR (state = 'cancelled' AND $3::bigint > 0 AND finalized_at < now() - $3::bigint * interval '1 microsecond'))
    -- A workflow's tasks stay until every one is final, a batch's jobs
    -- until it is finished (docs/workflows.md).
    -- A workflow's tasks are read over its range of ids (schema 27), by
    -- the primary key, for each candidate: the bounds are subqueries of
    -- the candidate's row, so the planner cannot hash the check over
    -- every workflow's tasks, nor read the whole table for each, as it
    -- did with the range in a join.
    AND (workflow_id IS NULL OR NOT EXISTS (SELECT 1 FROM {{s}}.spool_jobs w
      WHERE w.id BETWEEN (SELECT coalesce(wf.first_id, 0) FROM {{s}}.spool_workflows wf WHERE wf.id = spool_jobs.workflow_id)
          AND (SELECT coalesce(wf.last_id, 9223372036854775807) FROM {{s}}.spool_workflows wf WHERE wf.id = spool_jobs.workflow_id)
        AND w.workflow_id = spool_jobs.workflow_id AND w.state NOT IN ('completed', 'discarded', 'cancelled'))
      -- nor in a lease row (schema 28: running), found by span over the range.
      AND NOT EXISTS (SELECT 1 FROM {{s}}.spool_leases l CROSS JOIN LATERAL unnest(l.jobs) k
        WHERE l.span && (SELECT int8range(coalesce(wf.first_id, 0), coalesce(wf.last_id, 9223372036854775806), '[]')
            FROM {{s}}.spool_workflows wf WHERE wf.id = spool_jobs.workflow_id)
          AND k.workflow_id = spool_jobs.workflow_id AND k.id <> ALL (l.done)))
    AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM {{s}}.spool_batches b
      WHERE b.id = spool_jobs.batch_id AND b.finished_at IS NULL))
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
DELETE FROM {{s}}.spool_jobs j USING doomed d WHERE j.id = d.id
