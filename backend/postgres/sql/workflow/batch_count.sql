UPDATE {{s}}.spool_batches SET completed = completed + $2, discarded = discarded + $3, cancelled = cancelled + $4
WHERE id = $1
