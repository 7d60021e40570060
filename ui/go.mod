module github.com/spoolq/spool/ui

go 1.26.8

// The other modules of this repository, from the working tree; a release
// tags each module and these replacements give way to versions.
replace github.com/spoolq/spool => ..

require github.com/spoolq/spool v0.0.0-00010101000000-000000000000
