SELECT queue, CAST(state AS CHAR), COUNT(*) FROM {{db}}.spool_jobs GROUP BY queue, state ORDER BY queue, state
