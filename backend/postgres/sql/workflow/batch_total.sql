UPDATE {{s}}.spool_batches SET total = total + $2 WHERE id = $1
