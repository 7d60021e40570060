-- Pause queue ?1 at ?2 (microseconds), keeping the first pause's time when
-- the queue is paused already.
INSERT INTO spool_queues (name, paused_at) VALUES (?1, ?2)
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(paused_at, excluded.paused_at)
