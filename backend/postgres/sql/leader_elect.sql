-- Leader election: take the election $1 for client $2 for $3
-- microseconds when it has no leader, renew it when $2 leads, or take it
-- over when the leader's term ended. Returns a row only on success; no
-- session state, so it works behind a transaction-mode pooler.
INSERT INTO {{s}}.spool_leader AS l (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, now(), now() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
  leader_id = EXCLUDED.leader_id,
  expires_at = EXCLUDED.expires_at,
  elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE now() END
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
RETURNING leader_id
