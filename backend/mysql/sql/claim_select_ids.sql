-- A small claim of the jobs Listen listed for its queue (listed.go), in a
-- READ COMMITTED transaction: lock those of the listed ids that are due
-- pending rows of the queue, by primary key, skipping rows others hold.
-- Unlike claim_select.sql it does not walk the claim index, whose head
-- holds the delete-marked entries of the jobs claimed since the last
-- purge. The id list, then "ORDER BY … LIMIT n FOR UPDATE SKIP LOCKED"
-- with n the list's length, are appended: every row locked is returned.
-- Params: the queue, twice.
SELECT {{claimcols}}, UTC_TIMESTAMP(6) FROM {{db}}.spool_jobs FORCE INDEX (PRIMARY)
WHERE phase = 1 AND queue = ? AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{db}}.spool_queues q WHERE q.name = ? AND q.paused_at IS NOT NULL)
  AND id IN 
