-- What Listen reads every listenSlowInterval: a sum that changes when the
-- set of cancellation events of the last 10 seconds does (one that
-- committed after a higher seq leaves listen_heads' maximum as it was),
-- and one that changes when the set of paused queues does.
SELECT (SELECT coalesce(sum(seq), 0) FROM {{db}}.spool_cancels WHERE at >= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND),
  (SELECT count(*) + coalesce(sum(crc32(name)), 0) FROM {{db}}.spool_queues WHERE paused_at IS NOT NULL)
