module github.com/spoolq/spool/backend/postgres

go 1.26.8

// The other modules of this repository, from the working tree; a release
// tags each module and these replacements give way to versions.
replace (
	github.com/spoolq/spool => ../..
	github.com/spoolq/spool/internal/testkit => ../../internal/testkit
)

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/spoolq/spool v0.0.0-00010101000000-000000000000
	github.com/spoolq/spool/internal/testkit v0.0.0-00010101000000-000000000000
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
