-- listen_heads.sql, and the looker's lease of the listener's set of
-- queues (schema 18: the highest job id its holder read, whether the
-- holder has no idle worker, whether the lease is live by the server's
-- clock, whether its holder gave it up, and the holder; NULL when the row
-- is missing). Read instead of listen_heads.sql by a listener that does
-- not hold the lease, while another holds it or when the heads show ids
-- it has not accounted for: an idle fleet's looks read no lease.
SELECT (SELECT coalesce(max(id), 0) FROM {{db}}.spool_jobs),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_wake_notes),
  (SELECT coalesce(max(seq), 0) FROM {{db}}.spool_cancels),
  (SELECT count(*) + coalesce(sum(crc32(name)), 0) FROM {{db}}.spool_queues WHERE paused_at IS NOT NULL),
  (SELECT concat_ws(' ', cursor_id, slow, until > UTC_TIMESTAMP(6), until < '1000-01-02', holder) FROM {{db}}.spool_looker WHERE set_key = ?)
