-- Workflow retry: each task of $1 (ids, with $2 the retried dependencies
-- it waits for and $3 whether retried tasks wait for it) runs again with a
-- fresh set of attempts: available now when it waits for none, else
-- waiting. Only discarded and cancelled tasks change (the rows are locked
-- and were read final in this transaction). The fence is kept, so old
-- leases stay fenced out.
UPDATE {{s}}.spool_jobs j SET attempt = 0, finalized_at = NULL, leased_until = NULL, leased_by = NULL,
  deps_left = r.deps, has_dependents = r.has_deps,
  state = (CASE WHEN r.deps > 0 THEN 'waiting' ELSE 'available' END)::{{s}}.spool_job_state,
  wait_kind = CASE WHEN r.deps > 0 THEN 'deps' END,
  run_at = CASE WHEN r.deps > 0 THEN j.run_at ELSE now() END
FROM unnest($1::bigint[], $2::integer[], $3::boolean[]) AS r(id, deps, has_deps)
WHERE j.id = r.id AND j.state IN ('discarded', 'cancelled')
RETURNING j.id, j.queue, j.priority, j.run_at, r.deps = 0
