UPDATE {{s}}.spool_batches SET finished_at = now()
WHERE id = $1 AND sealed AND finished_at IS NULL AND completed + discarded + cancelled >= total
RETURNING discarded + cancelled, coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)
