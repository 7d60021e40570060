INSERT INTO {{s}}.spool_batches (name, sealed) VALUES ($1, $2) RETURNING id
