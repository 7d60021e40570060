-- List newest first: list.sql's filters in descending id order, which
-- the primary key serves read backwards.
SELECT {{cols}} FROM {{s}}.spool_jobs
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
  AND (cardinality($3::text[]) = 0 OR state::text = ANY($3::text[]))
  AND id > $4 AND ($8 = 0 OR id < $8)
  AND ($6::timestamptz IS NULL OR created_at > $6) AND ($7::timestamptz IS NULL OR created_at < $7)
ORDER BY id DESC
LIMIT $5
