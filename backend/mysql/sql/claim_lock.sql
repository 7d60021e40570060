-- A claim lock of queue ?: its row of stripe ? in spool_flow_stripes,
-- -1 or -2 (flow locks use stripes 0 and up; claimLockSlots), created on
-- first use. The no-op update of an existing row still takes its exclusive
-- lock, held to the commit, so the pessimistic claims under one of a
-- queue's claim locks take their rows one at a time (Options.ClaimLock).
INSERT INTO {{db}}.spool_flow_stripes (queue, stripe) VALUES (?, ?)
ON DUPLICATE KEY UPDATE stripe = stripe
