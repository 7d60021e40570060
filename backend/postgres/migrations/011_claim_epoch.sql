-- Claim epochs (schema 11): claims may commit without waiting for their
-- WAL flush (spool_claim_commit=async: synchronous_commit off for the
-- claim's transaction only), which takes a flush wait out of every pickup.
-- A crash (or a failover to a
-- standby) can then lose a claim whose handler is already running, and
-- the job's next claim must not give out the same fence again, or that
-- handler could complete under it. So fences carry an epoch in their high
-- 16 bits, and the epoch moves on after every crash: spool_epoch holds it
-- durably; spool_epoch_live is an unlogged copy, which PostgreSQL empties
-- after a crash and which is empty on a promoted standby. A claim that
-- finds the copy gone moves the epoch on, in a transaction that commits
-- synchronously, before any claim uses the new epoch. Every lost claim was
-- made in an earlier epoch than the claims after the crash, so its fence
-- is below theirs.
CREATE TABLE {{schema}}.spool_epoch (epoch integer NOT NULL CHECK (epoch BETWEEN 0 AND 32767));
INSERT INTO {{schema}}.spool_epoch (epoch) VALUES (0);
CREATE UNLOGGED TABLE {{schema}}.spool_epoch_live (epoch integer NOT NULL);
INSERT INTO {{schema}}.spool_epoch_live (epoch) VALUES (0);

-- spool_claim_epoch returns the current epoch, moving it on first when
-- the live copy is gone (the transaction then commits synchronously).
CREATE FUNCTION {{schema}}.spool_claim_epoch() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  e integer;
BEGIN
  SELECT max(epoch) INTO e FROM {{schema}}.spool_epoch_live;
  IF e IS NOT NULL THEN
    RETURN e;
  END IF;
  PERFORM set_config('synchronous_commit', 'on', true);
  PERFORM 1 FROM {{schema}}.spool_epoch FOR UPDATE;
  -- Another claim may have moved it on while this one waited.
  SELECT max(epoch) INTO e FROM {{schema}}.spool_epoch_live;
  IF e IS NOT NULL THEN
    RETURN e;
  END IF;
  UPDATE {{schema}}.spool_epoch SET epoch = epoch + 1 RETURNING epoch INTO e;
  INSERT INTO {{schema}}.spool_epoch_live (epoch) VALUES (e);
  RETURN e;
END
$$;

-- spool_next_fence is the fence a claim in epoch e gives a job whose
-- fence is f: the next one within the epoch, or the epoch's first. Claims
-- read the epoch once, in a MATERIALIZED CTE, and pass it as a column, so
-- that this function is inlined: called with a subquery as e it was not,
-- and the call per row cost the server 8 µs per job in a drain.
CREATE FUNCTION {{schema}}.spool_next_fence(f integer, e integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN f >> 16 >= e THEN f + 1 ELSE (e << 16) + 1 END
$$;
