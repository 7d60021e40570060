-- Whether the file has the stall table (schema version 2 or later).
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'spool_stall'
