-- The head of the leased statements that need only the lease rows' ids and
-- fences (heartbeat_leased.sql, complete_leased_delete.sql): input, the
-- batch ($1 ids, $2 fences); locked, the lease rows holding any of $1
-- (locate.sql), locked and read as locked; hits (lease, deps, id, fence),
-- the batch's jobs still in them under their fences, deps telling those
-- of rows of jobs with dependents (schema 28). The rows' ids are
-- unnested once, then joined with the input, never the input re-read per
-- lease row (BENCHMARKS.md, "Joining lease rows with a batch").
input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
locked AS MATERIALIZED (
  SELECT l.id, l.done, l.ids, l.fences, l.deps FROM {{s}}.spool_leases l
  WHERE {{locate}}
  ORDER BY l.id
  FOR NO KEY UPDATE
),
held AS MATERIALIZED (
  SELECT l.id AS lease, l.deps, k.id, k.fence
  FROM locked l CROSS JOIN LATERAL unnest(l.ids, l.fences) AS k(id, fence)
  WHERE k.id <> ALL (l.done)
),
hits AS MATERIALIZED (
  SELECT h.lease, h.deps, h.id, h.fence FROM held h JOIN input i ON i.id = h.id AND i.fence = h.fence
)
