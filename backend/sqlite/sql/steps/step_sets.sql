-- Step sets: the records of a write as sets (spool_step_sets, schema 14),
-- one per job and lease, each a row of the VALUES: (id, fence, first name,
-- names, results), names a JSON array of the set's names and results one
-- of their results' texts as JSON strings (kept byte for byte), both in
-- the order recorded; a row of NULLs pads the statement to its size
-- (steps.go, setBuckets) and matches no job. Each set is written at ?1
-- (now) only while its lease (id, fence) holds the job and none of its
-- names is among the job's records, its sets' names or its spool_steps
-- rows: the one writer makes the check and the insert one step. A job
-- without records (every first attempt) is told by one probe of each
-- primary key; only a job with records has its names compared. The sets
-- are bound as parameters, not one JSON array: reading each set's fields
-- out of JSON cost SQLite twice the rest of the insert (BENCHMARKS.md,
-- "SQLite: a run's step records in one row"). A set not written is looked
-- at again record by record (steps.go, writeSets).
INSERT INTO spool_step_sets (job_id, name, names, results, fence, created_at)
SELECT j.id, v.column3, v.column4, v.column5, j.fence, ?1
FROM (VALUES {{sets}}) AS v CROSS JOIN spool_jobs AS j
WHERE j.id = v.column1 AND j.fence = v.column2 AND j.state = 'running'
  AND (NOT EXISTS (SELECT 1 FROM spool_step_sets AS s WHERE s.job_id = j.id)
    OR NOT EXISTS (
      SELECT 1 FROM spool_step_sets AS s, json_each(s.names) AS n, json_each(v.column4) AS m
      WHERE s.job_id = j.id AND n.value = m.value))
  AND (NOT EXISTS (SELECT 1 FROM spool_steps AS s WHERE s.job_id = j.id)
    OR NOT EXISTS (
      SELECT 1 FROM json_each(v.column4) AS m, spool_steps AS s
      WHERE s.job_id = j.id AND s.name = m.value))
ON CONFLICT (job_id, name) DO NOTHING
