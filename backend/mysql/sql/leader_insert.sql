-- Leader election: renew or take over an expired term; when no row
-- exists, the insert takes it and a duplicate key means another
-- client won. elected_at is read before leader_id is assigned.
INSERT INTO {{db}}.spool_leader (name, leader_id, elected_at, expires_at)
VALUES (?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
