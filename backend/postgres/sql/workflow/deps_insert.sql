INSERT INTO {{s}}.spool_deps (parent_id, child_id, on_fail) SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[])
