-- The heads every look of Listen reads, as scalar reads that need no
-- temporary table (a UNION of the row reads would): the highest job id,
-- the highest wake-up note seq, the highest cancellation event seq, and a
-- sum that changes when the set of paused queues does. Included as
-- {{listen_heads_cols}} by the listen_heads*.sql statements.
(SELECT coalesce(max(id), 0) FROM {{db}}.spool_jobs),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_wake_notes),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_cancels),
  (SELECT count(*) + coalesce(sum(crc32(name)), 0) FROM {{db}}.spool_queues WHERE paused_at IS NOT NULL)
