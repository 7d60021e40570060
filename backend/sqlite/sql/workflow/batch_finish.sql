-- A sealed batch whose members are all final is finished, once (the
-- finished_at guard); its callbacks come back for settling.
UPDATE spool_batches SET finished_at = ?2
WHERE id = ?1 AND sealed AND finished_at IS NULL AND completed + discarded + cancelled >= total
RETURNING discarded + cancelled, coalesce(on_success, 0), coalesce(on_failure, 0), coalesce(on_complete, 0)
