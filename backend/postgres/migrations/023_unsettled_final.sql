-- The index of unsettled jobs holds only what the leader's sweep looks
-- for: final jobs whose dependents a write outside a finish (a cancel, a
-- rescue) left unsettled. Schema 20 indexed every job with dependents,
-- so each write of a waiting, pending or running workflow task or batch
-- member inserted an entry, and the sweep read every such job at each
-- rescue (28 sweeps took 5.4 s of statement time in one drain of 1,000
-- workflows of 102 tasks: BENCHMARKS.md, "Workflows: the dependents'
-- path on PostgreSQL"). A finish through finish_deps.sql clears the flag
-- in the row version that makes the job final, so such a job never enters
-- this index.
DROP INDEX {{schema}}.spool_jobs_unsettled;
CREATE INDEX spool_jobs_unsettled ON {{schema}}.spool_jobs (id)
  WHERE has_dependents AND state IN ('completed', 'discarded', 'cancelled');
