-- Unlease jobs: move the jobs $1 that lease rows hold back into
-- spool_jobs as running rows (spool_unlease, schema 12), before an
-- operation on them in place (cancel, record). The lease rows are found
-- as the leased statements find theirs (queries.go, locateByIndex).
SELECT coalesce({{s}}.spool_unlease(array_agg(l.id), $1::bigint[]), 0)
FROM {{s}}.spool_leases l
WHERE {{locate}}
