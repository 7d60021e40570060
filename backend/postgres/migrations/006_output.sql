-- Job output (schema 6): what a handler recorded while it ran
-- (spool.RecordOutput), written by a fenced update of the running job.
ALTER TABLE {{schema}}.spool_jobs ADD COLUMN output jsonb;
