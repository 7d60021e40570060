SELECT {{batch_cols}} FROM spool_batches WHERE id = ?1
