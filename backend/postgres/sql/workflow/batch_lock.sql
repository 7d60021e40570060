SELECT sealed FROM {{s}}.spool_batches WHERE id = $1 FOR UPDATE
