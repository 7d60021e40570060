-- Signal: spool_signal (schema 24) in the statement's transaction.
SELECT first, woke, queue FROM {{s}}.spool_signal($1, $2, $3::jsonb)
