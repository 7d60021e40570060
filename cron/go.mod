module github.com/spoolq/spool/cron

go 1.26.8

require (
	github.com/robfig/cron/v3 v3.0.1
	github.com/spoolq/spool v0.0.0
)

// The root module, from the working tree; a release tags each module and
// this replacement gives way to a version.
replace github.com/spoolq/spool => ../
