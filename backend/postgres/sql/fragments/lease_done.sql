-- The end of the statements that take jobs out of lease rows
-- (finish_leased.sql and the leased completions): given the CTEs locked
-- (the lease rows, locked, as read: id, done, ids) and hit (lease, id: the
-- jobs that leave them), each lease row adds its jobs to done, or is
-- deleted when they are its last.
marks AS (
  SELECT lease, array_agg(id) AS ids FROM hit GROUP BY lease
),
kept AS (
  UPDATE {{s}}.spool_leases l SET done = l.done || m.ids
  FROM marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) < cardinality(k.ids)
),
gone AS (
  DELETE FROM {{s}}.spool_leases l
  USING marks m JOIN locked k ON k.id = m.lease
  WHERE l.id = m.lease AND cardinality(k.done) + cardinality(m.ids) >= cardinality(k.ids)
)
