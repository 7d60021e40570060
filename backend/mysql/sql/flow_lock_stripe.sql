-- One stripe of a queue's flow lock, taken after the shared lock
-- (flow_lock_shared.sql): its row, created on first use, written so that
-- its exclusive lock is held to the commit. Params: the queue, the stripe.
INSERT INTO {{db}}.spool_flow_stripes (queue, stripe) VALUES (?, ?)
ON DUPLICATE KEY UPDATE stripe = stripe
