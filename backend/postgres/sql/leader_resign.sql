DELETE FROM {{s}}.spool_leader WHERE name = $1 AND leader_id = $2
