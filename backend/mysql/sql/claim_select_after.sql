-- The second half of a backlog's pessimistic claim (claimHalves): as
-- claim_select.sql, from the first half's last row on, so that it reads
-- none of the rows the first half holds (SKIP LOCKED would check each
-- against the lock table). The three arms are three ranges of the claim
-- index, read in its order. The suffix "LIMIT n FOR UPDATE SKIP LOCKED"
-- is appended. Params: the queue, the last row's priority twice, its
-- run_at twice, its id, the queue.
SELECT {{cols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (spool_jobs_claim)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
  AND (priority > ? OR priority = ? AND (run_at > ? OR run_at = ? AND id > ?))
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
ORDER BY priority, run_at, id
