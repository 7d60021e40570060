module github.com/spoolq/spool/ui

go 1.25

require github.com/spoolq/spool v0.1.0
