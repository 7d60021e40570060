-- The edges of ?1, a JSON array of [parent, child, on_fail].
INSERT INTO spool_deps (parent_id, child_id, on_fail)
SELECT value->>0, value->>1, value->>2 FROM json_each(?1)
