SELECT {{cols}} FROM {{s}}.spool_jobs WHERE workflow_id = $1 ORDER BY id
