module github.com/spoolq/spool/backend/sqlite

go 1.26.8

// The other modules of this repository, from the working tree; a release
// tags each module and these replacements give way to versions.
replace (
	github.com/spoolq/spool => ../..
	github.com/spoolq/spool/backend/mysql => ../../backend/mysql
	github.com/spoolq/spool/backend/postgres => ../../backend/postgres
	github.com/spoolq/spool/cmd/spool => ../../cmd/spool
	github.com/spoolq/spool/examples => ../../examples
	github.com/spoolq/spool/internal/testkit => ../../internal/testkit
)

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/spoolq/spool v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.49.0
	modernc.org/sqlite v1.61.1
)

require (
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	modernc.org/libc v1.79.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)
