-- Pessimistic claim in one statement (MariaDB, under the queue's claim
-- lock, in a READ COMMITTED transaction): the derived table locks up to n
-- due pending rows of a queue in claim order from the claim index,
-- skipping rows others hold (a transaction's uncommitted insert, a small
-- claim's rows, a cancel in flight), as claim_select.sql does; the join
-- then claims them by primary key. Without the derived table's SKIP
-- LOCKED, an UPDATE … ORDER BY … LIMIT n waits for every such row, with
-- the claim lock held. The claimed ids are appended to the session's
-- @spool_claimed (which the caller sets to NULL first) by the fence's
-- assignment, evaluated once for each row updated and adding 0; the
-- caller reads the rows by those ids after the commit (claim_read.sql).
-- STRAIGHT_JOIN keeps the derived table first: on a small table the
-- optimizer would otherwise scan spool_jobs for the join, locking (and
-- waiting for) every row it meets.
-- The lease is based on the statement's now. Nothing is claimed from a
-- paused queue. Params: the queue, the queue, n, lease (µs), claim id (as
-- leaseHolder pads it).
UPDATE (
  SELECT id FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
  WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
    AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
  ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED) c
STRAIGHT_JOIN {{db}}.spool_jobs j ON j.id = c.id
SET j.state = 'running', j.attempt = j.attempt + 1,
  j.fence = j.fence + 1 + 0 * LENGTH(@spool_claimed := CONCAT_WS(',', @spool_claimed, j.id)),
  j.leased_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, j.leased_by = ?, j.attempted_at = UTC_TIMESTAMP(6)
WHERE j.state IN {{pending}}
