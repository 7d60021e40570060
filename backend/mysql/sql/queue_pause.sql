-- Pause a queue: set paused_at, keeping the first pause's time when the
-- queue is paused already.
INSERT INTO {{db}}.spool_queues (name, paused_at) VALUES (?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE paused_at = COALESCE(paused_at, UTC_TIMESTAMP(6))
