-- Complete, leased part, completed jobs deleted: the common finish of a
-- drain that keeps no history ($1 ids, $2 fences, all successes). A
-- deleted job leaves nothing to write back, so this reads only the lease
-- rows' ids, fences and done lists, never their jobs array (which
-- finish_leased.sql detoasts and unnests to rebuild each row). Same lock
-- and same rule as finish_leased.sql: each job's lease row is locked and
-- read as locked, an outcome applies only under the job's fence and only
-- once; the row marks its jobs done, or goes with its last job. Returns
-- the (id, fence) of each job completed.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
-- The lease rows holding any of $1, found as queries.go's locate says.
locked AS MATERIALIZED (
  SELECT l.id, l.done, l.ids, l.fences FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
),
held AS MATERIALIZED (
  SELECT l.id AS lease, k.id, k.fence
  FROM locked l CROSS JOIN LATERAL unnest(l.ids, l.fences) AS k(id, fence)
  WHERE k.id <> ALL (l.done)
),
hit AS MATERIALIZED (
  SELECT h.lease, h.id, h.fence FROM held h JOIN input i ON i.id = h.id AND i.fence = h.fence
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (queries.go, leaseDone).
{{lease_done}}
SELECT id, fence FROM hit
