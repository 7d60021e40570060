-- What every look of Listen reads first, in one statement of scalar reads
-- that need no temporary table (a UNION of the row reads would): the
-- highest job id, the highest wake-up note seq, the highest cancellation
-- event seq, a sum that changes when the set of paused queues does, and
-- the looker's lease of the listener's set of queues (schema 18: the highest job id its holder read,
-- whether the holder has no idle worker, whether the lease is live by the
-- server's clock, whether its holder gave it up, and the holder; NULL
-- when the row is missing).
-- Listen reads the rows of a part only when its figure moved.
SELECT (SELECT coalesce(max(id), 0) FROM {{db}}.spool_jobs),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_wake_notes),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_cancels),
  (SELECT count(*) + coalesce(sum(crc32(name)), 0) FROM {{db}}.spool_queues WHERE paused_at IS NOT NULL),
  (SELECT concat_ws(' ', cursor_id, slow, until > UTC_TIMESTAMP(6), until < '1000-01-02', holder) FROM {{db}}.spool_looker WHERE set_key = ?)
