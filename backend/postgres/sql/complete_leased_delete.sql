-- Complete, leased part, completed jobs deleted: the common finish of a
-- drain that keeps no history ($1 ids, $2 fences, all successes). A
-- deleted job leaves nothing to write back, so this reads only the lease
-- rows' ids, fences and done lists, never their jobs array (which
-- finish_leased.sql detoasts and unnests to rebuild each row). Same lock
-- and same rule as finish_leased.sql: each job's lease row is locked and
-- read as locked, an outcome applies only under the job's fence and only
-- once; the row marks its jobs done, or goes with its last job. Returns
-- the (id, fence) of each entry of the batch it did not complete, usually
-- none (completeMany takes them out of the batch): a row per job
-- completed cost the client reading it back, and the server no less
-- than this anti-join.
WITH
-- input, locked and hits: the jobs of $1 under their fences $2 in the
-- lease rows holding them, locked (fragments/leased_hits.sql).
{{leased_hits}},
-- A job with dependents is never deleted at its completion, and its
-- finish settles them: rows flagged deps are left to finish_deps_leased.sql
-- (their entries come back as not completed).
hit AS MATERIALIZED (
  SELECT lease, id, fence FROM hits WHERE NOT deps
),
-- The lease rows mark their jobs in hit done, or go with their last
-- (fragments/lease_done.sql).
{{lease_done}}
SELECT i.id, i.fence FROM input i
WHERE NOT EXISTS (SELECT 1 FROM hit h WHERE h.id = i.id AND h.fence = i.fence)
