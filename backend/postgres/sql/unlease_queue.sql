-- Unlease a queue's jobs (every queue's for $1 = ''), before a bulk
-- action that takes running jobs (bulk_cancel.sql).
SELECT coalesce({{s}}.spool_unlease(array_agg(id), NULL), 0)
FROM {{s}}.spool_leases WHERE $1 = '' OR queue = $1
