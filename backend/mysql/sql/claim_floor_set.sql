-- Moves the queue's claim floor to the last row a claim under the claim
-- lock took, in the claim's transaction (a claim rolled back rolls its
-- floor back); a claim that read from the head also records when.
-- Params: the floor's priority, run_at and id, whether the claim read
-- from the head, the queue.
UPDATE {{db}}.spool_flow_stripes SET floor_priority = ?, floor_run_at = CAST(? AS DATETIME(6)), floor_id = ?,
  head_at = IF(?, UTC_TIMESTAMP(6), head_at)
WHERE queue = ? AND stripe = -1
