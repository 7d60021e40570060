-- Pause queue $1: set paused_at, keeping the first pause's time when the
-- queue is paused already.
INSERT INTO {{s}}.spool_queues AS q (name, paused_at) VALUES ($1, now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, now())
