-- Names recorded already among a batch's: {{ids}} lists the job ids
-- ("(1,2,…)"), {{names}} one "?" per distinct name of the batch (bound);
-- both columns of the primary key, so the read is a range of the key.
SELECT job_id, name FROM {{db}}.spool_steps WHERE job_id IN {{ids}} AND name IN {{names}}
