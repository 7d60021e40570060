-- Steps of the job $1, in the order recorded: those of its sets (schema
-- 25), by their batch's time, their order among its sets and their order
-- within a set, and its spool_steps rows (written by clients before
-- schema 25).
SELECT name, result, fence, created_at FROM (
  SELECT n.name, (s.results -> (n.k::integer - 1))::text AS result, s.fence, s.created_at, s.part, n.k
  FROM {{s}}.spool_step_sets s CROSS JOIN LATERAL unnest(s.names) WITH ORDINALITY AS n(name, k)
  WHERE s.job_id = $1
  UNION ALL
  SELECT name, result::text, fence, created_at, 0, 0 FROM {{s}}.spool_steps WHERE job_id = $1
) r
ORDER BY created_at, part, k, name
