-- List: jobs by id after $4 (keyset paging) and before $8 (0: no bound),
-- filtered by queue $1, kind $2, states $3 and insert time after $6 and
-- before $7 (NULL: no bound) when given, at most $5.
SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
  AND (cardinality($3::text[]) = 0 OR state::text = ANY($3::text[]))
  AND id > $4 AND ($8 = 0 OR id < $8)
  AND ($6::timestamptz IS NULL OR created_at > $6) AND ($7::timestamptz IS NULL OR created_at < $7)
ORDER BY id
LIMIT $5
