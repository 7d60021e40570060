-- Leader election: renew or take over an expired term; when no row
-- exists, the insert takes it and a duplicate key means another
-- client won. elected_at is read before leader_id is assigned.
DELETE FROM {{db}}.spool_leader WHERE name = ? AND leader_id = ?
