-- Record: a running job's output and metadata, each replaced when not
-- NULL, only while the lease (id, fence) holds the job.
UPDATE {{db}}.spool_jobs SET output = COALESCE(?, output), metadata = COALESCE(?, metadata)
WHERE id = ? AND fence = ? AND state = 'running'
