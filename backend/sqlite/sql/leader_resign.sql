-- Resign (?1 name, ?2 client): hand the election over at once.
DELETE FROM spool_leader WHERE name = ?1 AND leader_id = ?2
