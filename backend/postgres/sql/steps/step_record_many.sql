-- Step record many: the steps of several jobs ($1 job ids, $2 fences, $3
-- names, $4 results; one element per step, a job's in the order recorded)
-- in one statement, each written only while its lease (id, fence) holds
-- its job in place, whose row it locks, in id order, until the
-- transaction ends; a name the job has recorded already (in a set or a
-- spool_steps row) is left as it is. A job's new records are one row of
-- spool_step_sets (schema 25), a new one past each 64 KiB of results.
-- Returns each step's position (from 1), whether it was recorded, and
-- whether its lease held its job in place. held looks each job up by its
-- primary key, in id order (OFFSET keeps the lateral subquery a loop over
-- the ids): planned freely, with statistics that lag a drain's claims in
-- place, the lookup scanned every running row.
WITH input AS MATERIALIZED (
  SELECT t.id, t.fence, t.name, t.result, t.ord
  FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[]) WITH ORDINALITY AS t(id, fence, name, result, ord)
), held AS MATERIALIZED (
  SELECT j.id, j.fence
  FROM (SELECT DISTINCT x.id FROM unnest($1::bigint[]) AS x(id) ORDER BY x.id) x
  CROSS JOIN LATERAL (SELECT j.id, j.fence, j.state FROM {{s}}.spool_jobs j WHERE j.id = x.id OFFSET 0) j
  WHERE j.state = 'running'
  FOR UPDATE OF j
), fresh AS MATERIALIZED (
  SELECT i.ord, i.id, i.fence, i.name, i.result,
    (sum(octet_length(i.result)) OVER (PARTITION BY i.id ORDER BY i.ord) - octet_length(i.result)) / 65536 AS part
  FROM input i JOIN held h ON h.id = i.id AND h.fence = i.fence
  WHERE NOT EXISTS (SELECT FROM {{s}}.spool_step_sets s WHERE s.job_id = i.id AND i.name = ANY (s.names))
    AND NOT EXISTS (SELECT FROM {{s}}.spool_steps s WHERE s.job_id = i.id AND s.name = i.name)
), written AS (
  INSERT INTO {{s}}.spool_step_sets (job_id, name, names, results, fence, part)
  SELECT id, (array_agg(name ORDER BY ord))[1], array_agg(name ORDER BY ord), jsonb_agg(result::jsonb ORDER BY ord), fence, part
  FROM fresh GROUP BY id, fence, part
)
SELECT i.ord, f.ord IS NOT NULL, h.id IS NOT NULL
FROM input i
LEFT JOIN held h ON h.id = i.id AND h.fence = i.fence
LEFT JOIN fresh f ON f.ord = i.ord
