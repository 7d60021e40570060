-- The file's change counter: it moves when another connection commits.
PRAGMA data_version
