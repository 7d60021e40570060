-- Unlease jobs: move the jobs $1 that lease rows hold back into
-- spool_jobs as running rows (spool_unlease, schema 12), before an
-- operation on them in place (cancel, record).
SELECT coalesce({{s}}.spool_unlease(array_agg(id), $1::bigint[]), 0)
FROM {{s}}.spool_leases
WHERE span && (SELECT int8range(min(x), max(x), '[]') FROM unnest($1::bigint[]) AS x) AND ids && $1::bigint[]
