UPDATE spool_batches SET sealed = 1 WHERE id = ?1 RETURNING id
