INSERT INTO spool_batches (name, created_at, sealed) VALUES (?1, ?2, ?3) RETURNING id
