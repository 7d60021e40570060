-- Record: a running job's output ($3) and metadata ($4), each replaced
-- when not NULL, only while the lease ($1 id, $2 fence) holds the job.
UPDATE {{s}}.spool_jobs SET output = coalesce($3::jsonb, output), metadata = coalesce($4::jsonb, metadata)
WHERE id = $1 AND fence = $2 AND state = 'running'
