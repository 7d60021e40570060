-- JSON strings without raw control characters (schema 10): RFC 8259 lets
-- U+0000 to U+001F into a string only escaped, and Go's decoder refuses
-- them raw, but MariaDB's JSON_VALID and the token pattern of schema 3
-- took them (the fuzz target stored metadata {"<newline>":10}). A raw
-- newline or tab between tokens stays allowed.
-- Statements are separated by lines holding only "-- statement".
DROP FUNCTION IF EXISTS {{db}}.spool_json_strict
-- statement
CREATE FUNCTION {{db}}.spool_json_strict(j LONGTEXT CHARACTER SET utf8mb4) RETURNS BOOLEAN
DETERMINISTIC
RETURN JSON_VALID(j) AND j COLLATE utf8mb4_bin REGEXP
  '^(?>[ \\t\\n\\r]++|"(?>[^"\\\\\\x00-\\x1f]++|\\\\(?>["\\\\/bfnrt]|u[0-9a-fA-F]{4}))*+"|[][{}:,]|true|false|null|-?+(?>0|[1-9][0-9]*+)(?>\\.[0-9]++)?+(?>[eE][+-]?+[0-9]++)?+(?![0-9.eE+-]))*+$'
