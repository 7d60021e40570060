-- Probe below a claim floor ($2, $3, $4): the lowest due pending key
-- of the floor's priority at or below it, read without locks
-- (floor.go; claims read higher priorities whole).
SELECT priority, run_at, id FROM {{s}}.spool_jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue = $1 AND run_at <= now()
  AND priority = $2::smallint AND (run_at, id) <= ($3::timestamptz, $4::bigint)
ORDER BY priority, run_at, id
LIMIT 1
