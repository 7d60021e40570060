module github.com/spoolq/spool

go 1.24
