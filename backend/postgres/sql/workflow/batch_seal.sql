UPDATE {{s}}.spool_batches SET sealed = true WHERE id = $1 RETURNING id
