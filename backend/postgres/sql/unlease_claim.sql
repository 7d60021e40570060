-- Unlease a claim's jobs: every lease row of claim $1 goes back into
-- spool_jobs as running rows (spool_unlease), before release_claim.sql.
SELECT coalesce({{s}}.spool_unlease(array_agg(id), NULL), 0)
FROM {{s}}.spool_leases WHERE leased_by = $1
