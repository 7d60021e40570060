-- Settle, step 2: the waiting dependents of the parents in ?2 (a JSON
-- array of [id, completed]) count them done, or are cancelled when a
-- parent that did not complete says so by its edge (on_fail 0). ?1 is now
-- (microseconds), ?3 the same as text for the error history.
WITH p AS (SELECT value->>0 AS id, value->>1 AS ok FROM json_each(?2)),
e AS (
  SELECT d.child_id AS cid, count(*) AS n, max(p.ok = 0 AND d.on_fail = 0) AS fail
  FROM spool_deps AS d JOIN p ON d.parent_id = p.id
  GROUP BY d.child_id
)
UPDATE spool_jobs AS c SET
  deps_left = c.deps_left - e.n,
  state = CASE WHEN e.fail THEN 'cancelled'
    WHEN c.deps_left - e.n > 0 THEN 'waiting'
    WHEN c.run_at > ?1 THEN 'scheduled' ELSE 'available' END,
  wait_kind = CASE WHEN e.fail OR c.deps_left - e.n <= 0 THEN NULL ELSE c.wait_kind END,
  finalized_at = CASE WHEN e.fail THEN ?1 END,
  errors = CASE WHEN e.fail THEN json_insert(coalesce(c.errors, '[]'), '$[#]', json_object(
    'attempt', c.attempt, 'at', ?3, 'error', 'cancelled: a dependency ended discarded or cancelled'))
    ELSE c.errors END
FROM e
WHERE c.id = e.cid AND c.state = 'waiting'
RETURNING id, state, queue
