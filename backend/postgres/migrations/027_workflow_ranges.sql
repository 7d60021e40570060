-- A workflow's tasks are found by the range of their ids, kept in its
-- row, instead of by an index of spool_jobs on workflow_id. That index
-- took an entry for every version of a task's row, and a task is written
-- three times in place (released, claimed, finished): in a drain of a DAG
-- most of the server's time went to index insertions, and this one's
-- entries all share one key per workflow, which is what made bottom-up
-- deletion run (BENCHMARKS.md, "The DAG's tasks without an index of their
-- workflow"). A workflow's tasks take their ids in one call, so the range
-- holds them all (and, at most, other jobs inserted at the same time,
-- which workflow_id tells apart); readers scan the primary key over it.
-- A workflow inserted by a client of an older schema has no range: the
-- readers then read the whole table (coalesce to every id).
ALTER TABLE {{schema}}.spool_workflows ADD COLUMN first_id bigint, ADD COLUMN last_id bigint;
UPDATE {{schema}}.spool_workflows w SET first_id = r.lo, last_id = r.hi
FROM (SELECT workflow_id, min(id) AS lo, max(id) AS hi FROM {{schema}}.spool_jobs
  WHERE workflow_id IS NOT NULL GROUP BY workflow_id) r
WHERE r.workflow_id = w.id;
-- A workflow whose tasks are all gone keeps an empty range.
UPDATE {{schema}}.spool_workflows SET first_id = 1, last_id = 0 WHERE first_id IS NULL;
DROP INDEX {{schema}}.spool_jobs_workflow;
