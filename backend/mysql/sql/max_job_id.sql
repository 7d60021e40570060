-- The highest job id, where Listen starts looking for new jobs.
SELECT coalesce(max(id), 0) FROM {{db}}.spool_jobs
