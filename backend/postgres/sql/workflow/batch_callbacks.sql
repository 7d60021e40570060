UPDATE {{s}}.spool_batches SET on_success = nullif($2, 0), on_failure = nullif($3, 0), on_complete = nullif($4, 0) WHERE id = $1
