-- Get a job and lock its row until the transaction ends.
SELECT {{cols}} FROM {{db}}.spool_jobs WHERE id = ? FOR UPDATE
