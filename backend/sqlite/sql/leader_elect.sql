-- Leader election (?1 name, ?2 client, ?3 now, ?4 term): take the election
-- when it has no leader, renew it when ?2 leads, or take it over when the
-- leader's term ended. Returns a row only on success.
INSERT INTO spool_leader AS l (name, leader_id, elected_at, expires_at)
VALUES (?1, ?2, ?3, ?3 + ?4)
ON CONFLICT (name) DO UPDATE SET
  leader_id = excluded.leader_id,
  expires_at = excluded.expires_at,
  elected_at = CASE WHEN l.leader_id = excluded.leader_id THEN l.elected_at ELSE excluded.elected_at END
WHERE l.leader_id = excluded.leader_id OR l.expires_at < ?3
RETURNING leader_id
