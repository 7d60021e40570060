-- Cleanup: $1..$3 are ages in microseconds for completed, discarded
-- and cancelled rows; 0 keeps that state.
WITH doomed AS MATERIALIZED (
  SELECT id FROM {{s}}.spool_jobs
  WHERE state IN ('completed', 'discarded', 'cancelled')
    AND ((state = 'completed' AND $1::bigint > 0 AND finalized_at < now() - $1::bigint * interval '1 microsecond')
      OR (state = 'discarded' AND $2::bigint > 0 AND finalized_at < now() - $2::bigint * interval '1 microsecond')
      OR (state = 'cancelled' AND $3::bigint > 0 AND finalized_at < now() - $3::bigint * interval '1 microsecond'))
  LIMIT $4
  FOR UPDATE SKIP LOCKED
)
DELETE FROM {{s}}.spool_jobs j USING doomed d WHERE j.id = d.id
