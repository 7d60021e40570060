-- Insert: the row tuples are appended (see insert.go).
SELECT {{cols}} FROM {{db}}.spool_jobs WHERE id > ?
