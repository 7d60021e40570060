-- A sum that changes when the set of cancellation events of the last 10
-- seconds does (one that committed after a higher seq leaves the heads'
-- maximum as it was). Included as {{listen_slow_col}}, every
-- listenSlowInterval.
(SELECT coalesce(sum(seq), 0) FROM {{db}}.spool_cancels WHERE at >= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND)
