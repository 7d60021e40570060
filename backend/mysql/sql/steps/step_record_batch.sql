-- Step records of a StepRecordMany batch (steps.go): {{rows}} is one
-- "(job_id, ?, ?, fence, UTC_TIMESTAMP(6))" per record (name and result
-- bound), in the order recorded, each of a job whose lease the same
-- transaction found holding it (held_many.sql, shared lock) and whose
-- name it did not find recorded; a name recorded in between fails the
-- statement with error 1062, and the caller writes the records one by one.
INSERT INTO {{db}}.spool_steps (job_id, name, result, fence, created_at) VALUES {{rows}}
