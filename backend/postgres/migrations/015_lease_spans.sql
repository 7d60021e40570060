-- Lease rows found by the span of their ids (schema 15), not by a GIN index
-- of every id. The GIN index took one entry per job a claim moved, about
-- 2 µs of the server's 14-16 µs a job in a drain; a span costs one GiST
-- entry per lease row. Lookups by job id read the rows whose span holds
-- the ids and check each row's ids exactly (queries.go, locate).
--
-- The span is generated from ids, so rows written by a client that knows
-- only schema 14 (one still running while another migrates) get theirs.
CREATE FUNCTION {{schema}}.spool_id_span(ids bigint[]) RETURNS int8range
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT int8range(min(x), max(x), '[]') FROM unnest(ids) x
$$;
ALTER TABLE {{schema}}.spool_leases
  ADD COLUMN span int8range GENERATED ALWAYS AS ({{schema}}.spool_id_span(ids)) STORED;
CREATE INDEX spool_leases_span ON {{schema}}.spool_leases USING gist (span);
DROP INDEX {{schema}}.spool_leases_ids;
