-- Claim extras (?1 a JSON array of job ids): the columns a claim does not
-- return (claimColumns in claimscan.go), read in the claim's transaction for
-- the rows whose claim said they hold something other than their defaults.
SELECT id, finalized_at, errors, coalesce(unique_key, ''), coalesce(unique_states, 0), output,
  coalesce(flow_key, ''), has_dependents, coalesce(workflow_id, 0), coalesce(workflow_task, ''), coalesce(batch_id, 0)
FROM spool_jobs
WHERE id IN (SELECT value FROM json_each(?1))
