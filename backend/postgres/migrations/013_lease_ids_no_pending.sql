-- Lease lookups without a pending list (schema 13). A GIN index with
-- fastupdate (the default) first appends new entries to an unsorted
-- pending list, merged into the index only when the list reaches
-- gin_pending_list_limit (4 MB) or at VACUUM; every search reads the
-- whole list. Claims insert 64 entries a lease row, so at 1,000 jobs/s the
-- list of spool_leases_ids grew by about 450 entries a second, and each
-- finish and heartbeat (ids && $1) read all of it: with 96,000 entries
-- pending (1,500 lease rows), a lookup of two ids read 253 pages and took
-- 2.0 ms, against 0.08 ms and 13 pages with no list; the claim that
-- overflows the list then merges all of it. Entries now go straight into
-- the index, at about 3.6 µs more per job inserted (1,500 one-row inserts
-- of 64 ids: 0.86 against 0.63 ms each).
ALTER INDEX {{schema}}.spool_leases_ids SET (fastupdate = off);
SELECT gin_clean_pending_list('{{schema}}.spool_leases_ids'::regclass);
