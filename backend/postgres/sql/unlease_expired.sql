-- Unlease expired: up to $1 lease rows whose lease ended by the DB clock
-- go back into spool_jobs as running rows (spool_unlease), for rescue.sql
-- after it. A lease extended meanwhile moves back too, still running.
SELECT coalesce({{s}}.spool_unlease(array_agg(id), NULL), 0) FROM (
  SELECT id FROM {{s}}.spool_leases WHERE leased_until < now() ORDER BY leased_until LIMIT $1
) e
