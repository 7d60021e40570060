-- Job output (schema 7): what a handler recorded while it ran
-- (spool.RecordOutput), written by a fenced update of the running job.
ALTER TABLE {{db}}.spool_jobs ADD COLUMN output JSON NULL
