-- Flow take (?1 now, ?2 lease, ?3 claim id, ?4 queue) from several keys in
-- one statement: {{picked}} is replaced by a UNION ALL of one part per key
-- (flow_part_*.sql), each with its key's and its maximum's parameters: ?5
-- and ?6 in the first part, plain ?s after it (flowPart in flow.go).
UPDATE spool_jobs
SET state = 'running', attempt = attempt + 1, fence = fence + 1,
    leased_until = ?1 + ?2, leased_by = ?3, attempted_at = ?1
WHERE id IN ({{picked}})
RETURNING {{cols}}
