-- Cheaper row writes (schema 13): the state's CHECK and the pending index's
-- WHERE test the state by comparisons instead of an IN list. SQLite codes an
-- IN list of more than two constants as a lookup in a temporary b-tree,
-- built once per statement in a query but once per row in a CHECK or a
-- partial index's WHERE: a claim evaluated the 8-value CHECK for each row it
-- took, and the pending index's condition for the row as it was and as it
-- became (three b-trees a row, about a fifth of the claim's instructions).
-- Same rows, same constraint: the claim, its probe and the flow claim name
-- the same comparisons, as SQLite needs to use a partial index.
--
-- The CHECK is edited in place, as migration 10 did (every stored state
-- passes it: it accepts exactly the same values); RESET reloads this
-- connection's schema and the index's DROP and CREATE change the schema
-- cookie, so every other connection reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
  'CHECK (state IN
                 (''available'', ''scheduled'', ''retryable'', ''running'', ''completed'', ''discarded'', ''cancelled'', ''waiting''))',
  'CHECK (state = ''available'' OR state = ''scheduled'' OR state = ''retryable'' OR state = ''running''
                 OR state = ''completed'' OR state = ''discarded'' OR state = ''cancelled'' OR state = ''waiting'')')
WHERE type = 'table' AND name = 'spool_jobs';
PRAGMA writable_schema = RESET;

DROP INDEX spool_jobs_pending;
CREATE INDEX spool_jobs_pending ON spool_jobs (queue, priority, run_at, id)
  WHERE state = 'available' OR state = 'scheduled' OR state = 'retryable';
