-- List: jobs by id after $4 (keyset paging), filtered by queue $1,
-- kind $2 and states $3 when given, at most $5.
SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
  AND (cardinality($3::text[]) = 0 OR state::text = ANY($3::text[]))
  AND id > $4
ORDER BY id
LIMIT $5
