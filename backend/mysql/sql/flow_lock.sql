-- The flow lock of queue ?: its '' rate row, created on first use. The
-- no-op update of an existing row still takes its exclusive lock, held to
-- the commit, so flow claims of one queue run one at a time.
INSERT INTO {{db}}.spool_flow_rates (queue, flow_key, tat) VALUES (?, '', '1970-01-01')
ON DUPLICATE KEY UPDATE queue = queue
