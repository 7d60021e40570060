-- What Listen reads every listenSlowInterval: a sum that changes when the
-- set of cancellation events of the last 10 seconds does (one that
-- committed after a higher seq leaves listen_heads' maximum as it was).
SELECT coalesce(sum(seq), 0) FROM {{db}}.spool_cancels WHERE at >= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND
