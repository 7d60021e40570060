-- Cleanup (?1 now; ?2, ?3, ?4 ages in microseconds for completed, discarded
-- and cancelled rows, 0 keeping that state; ?5 max).
DELETE FROM spool_jobs WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_finished
  WHERE finalized_at IS NOT NULL AND state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND ?2 > 0 AND finalized_at < ?1 - ?2)
      OR (state = 'discarded' AND ?3 > 0 AND finalized_at < ?1 - ?3)
      OR (state = 'cancelled' AND ?4 > 0 AND finalized_at < ?1 - ?4))
    -- A workflow's tasks stay until every one is final, a batch's jobs
    -- until it is finished (docs/workflows.md).
    AND (workflow_id IS NULL OR NOT EXISTS (SELECT 1 FROM spool_jobs AS w
      WHERE w.workflow_id = spool_jobs.workflow_id AND w.state NOT IN ('completed', 'discarded', 'cancelled')))
    AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM spool_batches AS b
      WHERE b.id = spool_jobs.batch_id AND b.finished_at IS NULL))
  LIMIT ?5
)
