-- Step record many: the steps of several jobs ($1 job ids, $2 fences, $3
-- names, $4 results; one element per step) in one statement, each written
-- only while its lease (id, fence) holds its job in place, whose row it
-- locks shared, in id order, until the transaction ends; a name recorded
-- already is left as it is. Returns each step's position (from 1),
-- whether it was recorded, and whether its lease held its job in place.
WITH input AS MATERIALIZED (
  SELECT t.id, t.fence, t.name, t.result, t.ord
  FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[]) WITH ORDINALITY AS t(id, fence, name, result, ord)
), held AS MATERIALIZED (
  SELECT j.id, j.fence FROM {{s}}.spool_jobs j
  WHERE j.id = ANY ($1::bigint[]) AND j.state = 'running'
  ORDER BY j.id
  FOR SHARE
), written AS (
  INSERT INTO {{s}}.spool_steps (job_id, name, result, fence)
  SELECT i.id, i.name, i.result::jsonb, i.fence FROM input i JOIN held h ON h.id = i.id AND h.fence = i.fence
  ON CONFLICT (job_id, name) DO NOTHING
  RETURNING job_id, name
)
SELECT i.ord, w.job_id IS NOT NULL, h.id IS NOT NULL
FROM input i
LEFT JOIN held h ON h.id = i.id AND h.fence = i.fence
LEFT JOIN written w ON w.job_id = i.id AND w.name = i.name
