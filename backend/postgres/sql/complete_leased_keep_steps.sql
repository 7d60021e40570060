-- Complete, leased part, completed jobs kept, with the runs' last step
-- records ($1 ids, $2 fences, all successes; the records as sets, one
-- element per set: $3 job id, $4 first name, $5 names as an array
-- literal, $6 results as a JSON array, $7 part, every set a job of $1's).
-- complete_leased_keep.sql, and the record sets of each job it completes
-- written in the same statement: the completion's lock and fence check
-- are theirs (no record of a job whose completion does not apply is
-- written), and they commit with it. The client groups a job's records
-- into sets as steps/step_record_many.sql does (in the order recorded, a
-- new set past each 64 KiB of results): grouped here, by a window over
-- the records and an ordered aggregate, the sets took twice as long as
-- their insert. Their names are not checked against the job's other
-- records: the run that recorded them read the job's records after its
-- claim (none at a first claim), no other attempt can record while its
-- lease holds, and its names are distinct (the runtime refuses a name
-- used twice in one run); ON CONFLICT leaves a set whose first name is
-- there already as it is. Why the records ride with the outcome:
-- BENCHMARKS.md, "A run's last step records ride with its outcome".
-- Returns the (id, fence) of each job completed.
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t(id, fence)
),
-- locked and held: the lease rows holding any of $1, locked, and every
-- job still in them (fragments/leased_jobs.sql).
{{leased_jobs}},
hit AS MATERIALIZED (
  SELECT h.* FROM held h JOIN input i ON i.id = h.id AND i.fence = h.run_fence
  WHERE NOT h.deps
),
-- written: each job of hit back in spool_jobs, completed
-- (fragments/completed_written.sql).
{{completed_written}},
steps_written AS (
  INSERT INTO {{s}}.spool_step_sets (job_id, name, names, results, fence, part)
  SELECT t.id, t.name, t.names::text[], t.results::jsonb, h.run_fence, t.part
  FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::integer[]) AS t(id, name, names, results, part)
  JOIN (SELECT DISTINCT id, run_fence FROM hit) h ON h.id = t.id
  ON CONFLICT DO NOTHING
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT id, run_fence FROM hit
