-- debounceMove moves the run time of job $1 if it is still pending:
-- now + $2 µs, never before its run time, never after its creation +
-- $3 µs ($3 = 0: no bound); args $4 replace its args when not NULL. A
-- claim that took the job first (a lease row, or running in place)
-- leaves nothing to update.
WITH cur AS MATERIALIZED (
  SELECT id, greatest(run_at, least(now() + $2::bigint * interval '1 microsecond',
    CASE WHEN $3::bigint > 0 THEN created_at + $3::bigint * interval '1 microsecond' ELSE 'infinity'::timestamptz END)) AS at
  FROM {{s}}.spool_jobs
  WHERE id = $1 AND state IN ('available', 'scheduled', 'retryable')
  FOR UPDATE
)
UPDATE {{s}}.spool_jobs j SET run_at = cur.at,
  state = CASE WHEN j.state = 'available' AND cur.at > now() THEN 'scheduled'::{{s}}.spool_job_state ELSE j.state END,
  args = coalesce($4::jsonb, j.args)
FROM cur WHERE j.id = cur.id
RETURNING j.id
