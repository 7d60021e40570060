SELECT sealed FROM spool_batches WHERE id = ?1
