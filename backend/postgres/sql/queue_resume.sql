-- Resume queue $1 and, when it was paused, wake the queue's listeners on
-- channel $2 with a bare queue name (which also resets their claim floor
-- for it).
WITH resumed AS (
  UPDATE {{s}}.spool_queues SET paused_at = NULL
  WHERE name = $1 AND paused_at IS NOT NULL
  RETURNING name
)
SELECT pg_notify($2, name) FROM resumed
