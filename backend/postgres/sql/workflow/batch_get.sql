SELECT {{batch_cols}} FROM {{s}}.spool_batches WHERE id = $1
