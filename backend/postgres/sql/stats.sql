SELECT queue, state::text, count(*) FROM {{s}}.spool_jobs GROUP BY 1, 2 ORDER BY 1, 2
