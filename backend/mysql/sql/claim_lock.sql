-- The claim lock of queue ?: its row of stripe -1 in spool_flow_stripes
-- (flow locks use stripes 0 and up), created on first use. The no-op
-- update of an existing row still takes its exclusive lock, held to the
-- commit, so the pessimistic claims of one queue take their rows one at a
-- time (Options.ClaimLock).
INSERT INTO {{db}}.spool_flow_stripes (queue, stripe) VALUES (?, -1)
ON DUPLICATE KEY UPDATE stripe = stripe
