UPDATE {{s}}.spool_jobs SET deps_left = 0, wait_kind = NULL, run_at = greatest(run_at, now()),
  state = (CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END)::{{s}}.spool_job_state
WHERE id = $1 AND state = 'waiting'
RETURNING queue, priority, run_at, id
