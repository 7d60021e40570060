-- Claim, first statement (?1 now, ?2 queue, ?3 max): reads the rows the
-- claim takes (fragments/claim_pick.sql), in claim order, as they are
-- before claim_lease.sql leases them in the same write transaction. The
-- write lock makes the pair exclusive, so it needs no row locks. A read
-- streams its rows, where an UPDATE … RETURNING keeps every returned row in
-- a temporary table until it has updated the last (docs/sqlite.md, "The
-- hot path and its costs"). It returns only what the claim does not know
-- (claimColumns in claimscan.go), attempt and fence before their increment.
SELECT {{claim_cols}}
{{claim_pick}}
