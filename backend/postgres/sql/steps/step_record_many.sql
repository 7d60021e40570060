-- Step record many: the steps of several jobs ($1 job ids, $2 fences, $3
-- names, $4 results; one element per step, a job's in the order recorded)
-- in one statement, each written only while its lease (id, fence) holds
-- its job, in a lease row or in place; a name the job has recorded
-- already (in a set or a spool_steps row), or earlier in the batch, is
-- left as it is. A job's new
-- records are one row of spool_step_sets (schema 25), a new one past each
-- 64 KiB of results. Returns the steps it did not record, usually none:
-- each one's position (from 1) and whether its lease held its job (then
-- its name was recorded already). Why each part is as it is:
-- BENCHMARKS.md, "Step records against lease rows".
--
-- A job held in a lease row stays there: the lease rows holding the
-- batch's jobs are found through the index of spans, as the leased
-- finishes find theirs, but matched with the batch's distinct jobs by a
-- hash join (fragments/locate.sql's = ANY of the batch, not hashed on a
-- cached plan, compares every candidate's ids with every record, and the
-- span of a batch of records covers every lease row in flight); then
-- they are locked FOR NO KEY UPDATE in id order and read as locked, so a
-- finish, a heartbeat or a move back in place (spool_unlease) of one of
-- their jobs waits for this transaction, and a job's records take turns
-- with each other (the name check below) as they do on a row in place.
-- The jobs no lease row holds are looked up in place after them (the
-- order the finishes and heartbeats lock in), by primary key in id order
-- (OFFSET keeps the lateral subquery a loop over the ids: planned freely,
-- with statistics that lag a drain's claims in place, the lookup scanned
-- every running row), and their rows locked FOR UPDATE.
--
-- A job's names are checked against its records with one lookup per table
-- (clash: a lateral LIMIT 1 into each primary key, never a hash of a
-- table of records), and name by name only for a job that has one of
-- them already. The result is read from one CTE, never joined back to
-- the input by position: planned from a one-row estimate, that join was
-- a nested loop over the batch's records squared.
WITH input AS MATERIALIZED (
  SELECT t.id, t.fence, t.name, t.result, t.ord
  FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[]) WITH ORDINALITY AS t(id, fence, name, result, ord)
), jobs AS MATERIALIZED (
  SELECT DISTINCT x.id FROM unnest($1::bigint[]) AS x(id)
), leases AS MATERIALIZED (
  SELECT DISTINCT c.lease
  FROM (
    SELECT l.id AS lease, k.id
    FROM {{s}}.spool_leases l CROSS JOIN LATERAL unnest(l.ids) AS k(id)
    WHERE l.span && (SELECT int8range(min(id), max(id), '[]') FROM jobs)
  ) c
  JOIN jobs j ON j.id = c.id
), leased AS MATERIALIZED (
  SELECT l.id, l.done, l.ids, l.fences FROM {{s}}.spool_leases l
  WHERE l.id IN (SELECT lease FROM leases)
  ORDER BY l.id
  FOR NO KEY UPDATE
), held_leased AS MATERIALIZED (
  SELECT k.id, k.fence
  FROM leased l CROSS JOIN LATERAL unnest(l.ids, l.fences) AS k(id, fence)
  WHERE k.id <> ALL (l.done)
), held_in_place AS MATERIALIZED (
  SELECT j.id, j.fence
  FROM (
    SELECT x.id FROM jobs x
    WHERE NOT EXISTS (SELECT FROM held_leased h WHERE h.id = x.id)
    ORDER BY x.id
  ) x
  CROSS JOIN LATERAL (SELECT j.id, j.fence, j.state FROM {{s}}.spool_jobs j WHERE j.id = x.id OFFSET 0) j
  WHERE j.state = 'running'
  FOR UPDATE OF j
), held AS MATERIALIZED (
  SELECT id, fence FROM held_leased
  UNION ALL
  SELECT id, fence FROM held_in_place
), checked AS MATERIALIZED (
  -- A name repeated in the batch for one job counts once, its first.
  SELECT i.ord, i.id, i.fence, i.name, i.result, h.id IS NOT NULL AS held,
    row_number() OVER (PARTITION BY i.id, i.name ORDER BY i.ord) = 1 AS first
  FROM input i LEFT JOIN held h ON h.id = i.id AND h.fence = i.fence
), clash AS MATERIALIZED (
  SELECT c.id
  FROM (SELECT id, array_agg(name) AS names FROM checked WHERE held GROUP BY id) c
  CROSS JOIN LATERAL (
    (SELECT FROM {{s}}.spool_step_sets s WHERE s.job_id = c.id AND s.names && c.names LIMIT 1)
    UNION ALL
    (SELECT FROM {{s}}.spool_steps s WHERE s.job_id = c.id AND s.name = ANY (c.names) LIMIT 1)
    LIMIT 1
  ) k
), fresh AS MATERIALIZED (
  SELECT c.ord, c.id, c.fence, c.name, c.result, c.held,
    c.held AND c.first AND (c.id NOT IN (SELECT id FROM clash)
      OR NOT EXISTS (
        (SELECT FROM {{s}}.spool_step_sets s WHERE s.job_id = c.id AND c.name = ANY (s.names) LIMIT 1)
        UNION ALL
        (SELECT FROM {{s}}.spool_steps s WHERE s.job_id = c.id AND s.name = c.name LIMIT 1))) AS fresh
  FROM checked c
), written AS (
  INSERT INTO {{s}}.spool_step_sets (job_id, name, names, results, fence, part)
  SELECT id, (array_agg(name ORDER BY ord))[1], array_agg(name ORDER BY ord), jsonb_agg(result::jsonb ORDER BY ord), fence, part
  FROM (
    SELECT f.ord, f.id, f.fence, f.name, f.result,
      (sum(octet_length(f.result)) OVER (PARTITION BY f.id ORDER BY f.ord) - octet_length(f.result)) / 65536 AS part
    FROM fresh f WHERE f.fresh
  ) f
  GROUP BY id, fence, part
)
SELECT ord, held FROM fresh WHERE NOT fresh
