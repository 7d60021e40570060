SELECT id, queue, kind, state, finalized_at FROM {{s}}.spool_jobs
WHERE finalized_at >= $1 AND (finalized_at > $1 OR id > $2) AND state IN ('completed', 'discarded', 'cancelled')
ORDER BY finalized_at, id LIMIT $3
