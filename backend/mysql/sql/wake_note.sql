-- Appends a wake-up note (Announce, PassOn); every Listen reads it.
INSERT INTO {{db}}.spool_wake_notes (body) VALUES (?)
