-- Heartbeat: extend the leases ($1 ids, $2 fences) of running jobs by $3
-- microseconds on the DB clock, never moving a lease back (a client's beats
-- may land out of order). Rows not returned lost their lease.
-- Rows are found by primary key, never through spool_jobs_running, whose
-- entries for every version of a row that ran in place since the last
-- vacuum a scan would read (a workflow's tasks ran in place before schema
-- 28: 100,000 entries late in a drain of 102,000 tasks); the state is compared with
-- the input's column run, which the planner cannot match to that index's
-- predicate.
-- The rows are locked in id order before the update, as step records and
-- finishes lock theirs: an UPDATE locks rows in its scan's order, which a
-- bitmap scan makes the order on disk, and two statements locking one
-- job's rows in different orders deadlock.
WITH i AS MATERIALIZED (
  SELECT *, 'running'::{{s}}.spool_job_state AS run FROM unnest($1::bigint[], $2::integer[]) AS i(id, fence)
), held AS MATERIALIZED (
  SELECT j.id FROM {{s}}.spool_jobs j JOIN i ON j.id = i.id AND j.fence = i.fence AND j.state = i.run
  WHERE j.id = ANY (ARRAY(SELECT id FROM i))
  ORDER BY j.id
  FOR NO KEY UPDATE OF j
)
UPDATE {{s}}.spool_jobs j SET leased_until = greatest(j.leased_until, now() + $3::bigint * interval '1 microsecond')
FROM held h
WHERE j.id = h.id
RETURNING j.id, j.fence
