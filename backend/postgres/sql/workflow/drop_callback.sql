DELETE FROM {{s}}.spool_jobs WHERE id = $1 AND state = 'waiting'
