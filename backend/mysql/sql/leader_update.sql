-- Leader election: renew or take over an expired term; when no row
-- exists, the insert takes it and a duplicate key means another
-- client won. elected_at is read before leader_id is assigned.
UPDATE {{db}}.spool_leader
SET elected_at = IF(leader_id = ?, elected_at, UTC_TIMESTAMP(6)), leader_id = ?,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND (leader_id = ? OR expires_at < UTC_TIMESTAMP(6))
