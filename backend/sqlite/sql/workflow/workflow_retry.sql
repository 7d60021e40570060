-- Workflow retry (?1 now): each task of ?2 (a JSON array of [id, deps,
-- has_dependents]) runs again with a fresh set of attempts: available now
-- when it waits for no retried dependency, else waiting for deps of them.
-- Only discarded and cancelled tasks change (read final in this write
-- transaction). The fence is kept, so old leases stay fenced out.
UPDATE spool_jobs AS j SET attempt = 0, finalized_at = NULL, leased_until = NULL, leased_by = NULL,
  deps_left = t.value->>1, has_dependents = t.value->>2,
  state = CASE WHEN t.value->>1 > 0 THEN 'waiting' ELSE 'available' END,
  wait_kind = CASE WHEN t.value->>1 > 0 THEN 'deps' END,
  run_at = CASE WHEN t.value->>1 > 0 THEN j.run_at ELSE ?1 END
FROM json_each(?2) AS t
WHERE j.id = t.value->>0 AND j.state IN ('discarded', 'cancelled')
RETURNING queue, state = 'available'
