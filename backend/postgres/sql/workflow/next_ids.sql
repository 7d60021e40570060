SELECT nextval(pg_get_serial_sequence('{{s}}.spool_jobs', 'id')) FROM generate_series(1, $1)
