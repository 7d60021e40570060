module github.com/spoolq/spool/ui

go 1.26.8

require github.com/spoolq/spool v0.1.0
