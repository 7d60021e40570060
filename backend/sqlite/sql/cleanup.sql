-- Cleanup (?1 now; ?2, ?3, ?4 ages in microseconds for completed, discarded
-- and cancelled rows, 0 keeping that state; ?5 max).
DELETE FROM spool_jobs WHERE id IN (
  SELECT id FROM spool_jobs INDEXED BY spool_jobs_finished
  WHERE finalized_at IS NOT NULL AND state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND ?2 > 0 AND finalized_at < ?1 - ?2)
      OR (state = 'discarded' AND ?3 > 0 AND finalized_at < ?1 - ?3)
      OR (state = 'cancelled' AND ?4 > 0 AND finalized_at < ?1 - ?4))
  LIMIT ?5
)
