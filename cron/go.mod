module github.com/spoolq/spool/cron

go 1.24

require (
	github.com/robfig/cron/v3 v3.0.1
	github.com/spoolq/spool v0.1.0
)
