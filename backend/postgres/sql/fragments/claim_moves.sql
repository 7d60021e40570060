-- The writing parts of a claim (claim_write.sql), up to and without the
-- statement's result (claim_rows.sql): the CTEs picked to updated.
picked AS MATERIALIZED (
  SELECT * FROM higher UNION ALL SELECT * FROM above
),
-- moved deletes the rows by the tuple ids the locks above returned, which
-- cannot move or be pruned while this transaction holds them: one TID
-- scan of the sorted list instead of a primary-key lookup per job. It
-- returns the columns the output reads beside the whole row: read from
-- the deleted row, each column costs one pass over the row, where a field
-- of the whole row walks it again from its start (the row has nulls).
-- Measured: BENCHMARKS.md, "Deleting claimed rows by tuple id".
moved AS MATERIALIZED (
  DELETE FROM {{s}}.spool_jobs j
  WHERE j.ctid = ANY (ARRAY(SELECT p.tid FROM picked p WHERE p.leasable))
  RETURNING j AS job, j.id, j.queue, j.kind, j.args, j.priority, j.run_at, j.attempt, j.max_attempts,
    j.fence, j.created_at, j.errors, j.tags, j.metadata, j.output, j.has_dependents, j.workflow_id, j.workflow_task
),
-- late takes the jobs moved missed: a row that changed after this
-- statement's snapshot, but before the lock reached it, is locked in its
-- latest version, which a TID scan under that snapshot does not see. A
-- delete by id reaches the visible version and follows it to the latest.
-- It runs only when moved fell short; a row moved deleted, earlier in the
-- same statement, it leaves alone.
late AS MATERIALIZED (
  DELETE FROM {{s}}.spool_jobs j USING picked p
  WHERE j.id = p.id AND p.leasable
    AND (SELECT count(*) FROM moved) < (SELECT count(*) FROM picked WHERE leasable)
  RETURNING j AS job, j.id, j.queue, j.kind, j.args, j.priority, j.run_at, j.attempt, j.max_attempts,
    j.fence, j.created_at, j.errors, j.tags, j.metadata, j.output, j.has_dependents, j.workflow_id, j.workflow_task
),
-- gone is every job that left spool_jobs, read in place by both its
-- readers below rather than copied once more.
gone AS NOT MATERIALIZED (
  SELECT * FROM moved UNION ALL SELECT * FROM late
),
-- The three arrays of a lease row are aggregated over the same rows in
-- the same order, so their elements line up; the span is written here, as
-- spool_id_span(ids) would give it (schema 17). Lease rows take the jobs in
-- the order the delete meets them, the table's, so their id spans stay
-- narrow. Jobs with dependents (workflow tasks others wait for) go in rows
-- of their own, flagged deps (schema 28), which the plain completions
-- skip: their finish settles their dependents (finish_deps_leased.sql).
leased AS (
  INSERT INTO {{s}}.spool_leases (queue, leased_by, leased_until, claimed_at, epoch, ids, fences, jobs, span, deps)
  SELECT $1, $4, now() + $3::bigint * interval '1 microsecond', now(), ep.e,
    array_agg(m.id), array_agg({{s}}.spool_next_fence(m.fence, ep.e)), array_agg(m.job),
    int8range(min(m.id), max(m.id), '[]'), m.has_dependents
  FROM (SELECT g.id, g.fence, g.job, g.has_dependents, row_number() OVER () AS ord FROM gone g) m, ep
  GROUP BY m.has_dependents, (m.ord - 1) / 64, ep.e
),
updated AS (
  UPDATE {{s}}.spool_jobs j
  SET state = 'running', attempt = j.attempt + 1, fence = {{s}}.spool_next_fence(j.fence, ep.e),
    leased_until = now() + $3::bigint * interval '1 microsecond', leased_by = $4, attempted_at = now()
  FROM picked, ep
  WHERE j.id = picked.id AND NOT picked.leasable
  RETURNING {{jcols}}
)
