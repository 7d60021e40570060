-- Get: a job in spool_jobs, or running in a lease row (schema 12).
SELECT {{cols}} FROM {{s}}.spool_jobs WHERE id = $1
UNION ALL
SELECT {{cols}} FROM {{s}}.spool_leased_jobs v
WHERE v.id = $1 AND v.lease = ANY (ARRAY(SELECT l.id FROM {{s}}.spool_leases l WHERE l.span @> $1::bigint AND l.ids @> ARRAY[$1::bigint]))
