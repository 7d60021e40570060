module github.com/spoolq/spool/ui

go 1.26.8

// The other modules of this repository, from the working tree; a release
// tags each module and these replacements give way to versions.
replace (
	github.com/spoolq/spool => ..
	github.com/spoolq/spool/backend/sqlite => ../backend/sqlite
)

require github.com/spoolq/spool v0.0.0-00010101000000-000000000000

require (
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	golang.org/x/sys v0.49.0 // indirect
	modernc.org/libc v1.79.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.61.1 // indirect
)

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/spoolq/spool/backend/sqlite v0.0.0-00010101000000-000000000000
)
