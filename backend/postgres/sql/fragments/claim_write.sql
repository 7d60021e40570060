-- The writes of a claim (claim.sql, claim_in_place.sql, flow_quick.sql),
-- after its arms higher and above: picked, the arms' rows; the leasable
-- ones move into lease rows (moved, late, gone, leased), the others are
-- updated in place (updated); the result is every claimed job.
{{claim_moves}}
{{claim_rows}}
