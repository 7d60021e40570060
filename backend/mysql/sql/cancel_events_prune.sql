-- Drops cancellation events older than a minute: every holder's heartbeat
-- has found the cancellation by then.
DELETE FROM {{db}}.spool_cancels WHERE at < UTC_TIMESTAMP(6) - INTERVAL 60 SECOND
