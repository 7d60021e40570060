SELECT {{batch_cols}} FROM {{s}}.spool_batches WHERE $1 = 0 OR id < $1 ORDER BY id DESC LIMIT $2
