-- locked, the lease rows holding any of $1 (locate.sql), locked in id
-- order and read as locked: the head of the statements that write jobs
-- back from lease rows (fragments/leased_jobs.sql and the finishes of
-- jobs with dependents, workflow/finish_deps_leased.sql and
-- workflow/complete_deps_leased.sql).
locked AS MATERIALIZED (
  SELECT l.id, l.claimed_at, l.done, l.ids, l.fences, l.jobs, l.deps FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
)
