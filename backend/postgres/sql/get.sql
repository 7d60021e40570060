SELECT {{cols}} FROM {{s}}.spool_jobs WHERE id = $1
