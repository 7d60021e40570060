-- The job that holds a unique key, read after an insert of the key was
-- refused. A locking read sees the newest committed row whatever the
-- transaction's isolation, and keeps the holder from leaving its holding
-- states until the transaction ends (as the refused insert's own check
-- would have).
SELECT id FROM {{db}}.spool_jobs WHERE unique_active = ? LOCK IN SHARE MODE
