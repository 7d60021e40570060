-- Which of the picked rows this claim won, when not all of them.
SELECT id FROM {{db}}.spool_jobs WHERE leased_by = ? AND state = 'running' AND id IN 
