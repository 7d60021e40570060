-- Step records an outcome carries (finish.go, backend.OutcomeStepWriter),
-- of jobs whose lease the same transaction found holding them and whose
-- outcome it writes: {{rows}} is one "(job_id, ?, ?, fence,
-- UTC_TIMESTAMP(6))" per record (name and result bound), in the order
-- recorded; a name recorded already is left as it is.
INSERT INTO {{db}}.spool_steps (job_id, name, result, fence, created_at) VALUES {{rows}}
ON DUPLICATE KEY UPDATE seq = seq
