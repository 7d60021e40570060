-- Queue stats: jobs by queue and state.
SELECT queue, state, count(*) FROM spool_jobs GROUP BY 1, 2 ORDER BY 1, 2
