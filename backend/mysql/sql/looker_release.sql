-- Gives the looker's lease of a set of queues up (its holder saw no new job for a while),
-- recording the highest job id it has read: the next process to see a
-- higher one takes the lease at once.
UPDATE {{db}}.spool_looker
SET until = '1000-01-01 00:00:00', cursor_id = greatest(cursor_id, ?)
WHERE set_key = ? AND holder = ?
