SELECT id, queue, kind, state, finalized_at FROM {{db}}.spool_jobs
WHERE finalized_at >= ? AND finalized_at < {{never}} AND (finalized_at > ? OR id > ?) AND state IN ('completed', 'discarded', 'cancelled')
ORDER BY finalized_at, id LIMIT ?
