-- Heartbeat, leased part (schema 12): extend by $3 microseconds the lease
-- rows holding any of the jobs ($1 ids, $2 fences), and return the jobs
-- found in them; the rest go to heartbeat.sql after it. A lease row's
-- jobs share one lease, so a beat for one extends its siblings too: they
-- have one holder, whose heartbeat covers them all.
WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
-- The lease rows holding any of $1, found as queries.go's locate says.
locked AS MATERIALIZED (
  SELECT l.id, l.done, l.ids, l.fences FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
),
hit AS MATERIALIZED (
  SELECT l.id AS lease, i.id, i.fence
  FROM locked l
  CROSS JOIN LATERAL unnest(l.ids, l.fences) AS k(id, fence)
  JOIN input i ON i.id = k.id AND i.fence = k.fence
  WHERE k.id <> ALL (l.done)
),
extended AS (
  UPDATE {{s}}.spool_leases l SET leased_until = now() + $3::bigint * interval '1 microsecond'
  WHERE l.id IN (SELECT lease FROM hit)
)
SELECT id, fence FROM hit
