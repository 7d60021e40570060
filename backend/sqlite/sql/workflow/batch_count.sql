-- A batch counts final members: ?2 completed, ?3 discarded, ?4 cancelled.
UPDATE spool_batches SET completed = completed + ?2, discarded = discarded + ?3, cancelled = cancelled + ?4
WHERE id = ?1
