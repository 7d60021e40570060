-- Takes or renews the looker's lease of a set of queues (schema 18;
-- set_key, the second-to-last ?) for holder ? until ? microseconds from now, recording the highest job id it has read (?)
-- and whether it has no idle worker (?, slow): when the lease is this
-- holder's, when it has lapsed, or when the caller has an idle worker
-- (the last ?) and the holder has none. The found-rows count says whether
-- the caller holds it now.
UPDATE {{db}}.spool_looker
SET holder = ?, until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    cursor_id = greatest(cursor_id, ?), slow = ?
WHERE set_key = ? AND (holder = ? OR until < UTC_TIMESTAMP(6) OR (? AND slow = 1))
