-- Held: whether the lease ($1 id, $2 fence) holds its job in place.
SELECT EXISTS (SELECT FROM {{s}}.spool_jobs WHERE id = $1 AND fence = $2 AND state = 'running')
