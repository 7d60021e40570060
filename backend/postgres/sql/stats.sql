SELECT queue, state::text, count(*) FROM (
  SELECT queue, state FROM {{s}}.spool_jobs
  UNION ALL
  SELECT queue, state FROM {{s}}.spool_leased_jobs
) j GROUP BY 1, 2 ORDER BY 1, 2
