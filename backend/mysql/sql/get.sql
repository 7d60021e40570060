SELECT {{cols}} FROM {{db}}.spool_jobs WHERE id = ?
