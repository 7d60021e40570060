-- Complete, small form: complete_keep.sql for a batch of at most
-- genericPlanMax jobs with distinct ids, written so that its cached
-- generic plan has one way into spool_jobs, the primary key. There is no
-- join for the planner to turn around, and the running state is compared
-- as text, from which no partial index's predicate can be proved: a plan
-- through the running rows' index is what once read every running row
-- per finish (customPlan). Planned per call, it spent more time planning
-- than running (BENCHMARKS.md, "Small completions on a generic plan").
UPDATE {{s}}.spool_jobs j
SET state = 'completed', finalized_at = now(), leased_until = NULL, leased_by = NULL
WHERE j.id = ANY($1::bigint[]) AND j.state::text = 'running' AND NOT j.has_dependents
  AND j.fence = ($2::integer[])[array_position($1::bigint[], j.id)]
RETURNING j.id, j.fence
