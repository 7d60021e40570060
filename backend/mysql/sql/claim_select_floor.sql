-- claim_select.sql above the queue's claim floor: the rows of the floor's
-- priority after the floor's key, and every row of the other priorities
-- (a job of a more urgent priority that came after the floor was set is
-- claimed first, as from the head). Four ranges of the claim index, read
-- in its order (EXPLAIN: range, no filesort). The suffix "LIMIT n FOR
-- UPDATE SKIP LOCKED" is appended. Params: the queue, twice; the floor's
-- priority three times, its run_at twice, its id.
SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
  AND (priority < ? OR priority > ? OR priority = ? AND (run_at > ? OR run_at = ? AND id > ?))
ORDER BY priority, run_at, id
