package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/spoolq/spool/cmd/spool/cli"
	"github.com/spoolq/spool/cmd/spool/stores"
)

// MigrateCommand creates Spool's schema or brings it to the newest version.
type MigrateCommand struct{ m *Main }

// Run implements Command.
func (c *MigrateCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("migrate", "unexpected argument %q", pos[0])
	}
	dsn, err := storeURL(c.m, *dbURL, true)
	if err != nil {
		return err
	}
	be, err := openStore(ctx, c.m, dsn, true)
	if err != nil {
		return err
	}
	defer be.Close()

	support := stores.For(dsn)
	before, err := be.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := be.Migrate(ctx); err != nil {
		return err
	}
	after, err := be.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := after.Check(); err != nil {
		return fmt.Errorf("migrate: after migrating: %w", err)
	}
	where := be.Name()
	if support.Location != nil {
		if loc := support.Location(be); loc != "" {
			where += " " + loc
		}
	}
	fmt.Fprintf(c.m.Stdout, "%s: %s\n", where, describeMigration(before.Current, after.Current, after.Latest))
	return nil
}

// describeMigration formats a migration result for people.
func describeMigration(before, after, latest int) string {
	if before == after {
		return fmt.Sprintf("schema already at version %d (latest known: %d), nothing to do", after, latest)
	}
	return fmt.Sprintf("migrated schema from version %d to %d (latest known: %d)", before, after, latest)
}

// Usage implements Command.
func (c *MigrateCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool migrate [--database-url URL]

Creates Spool's schema, or applies the migrations it is missing, and prints
the schema version. Safe to run from many processes at once.

A database that cannot be reached yet (not running, restarting, out of
connection slots, its host name not resolvable yet) is waited for: each
failed try is logged to stderr with its cause and when the next try is,
until the database answers or the command is interrupted. A wrong
password or a database that does not exist ends it at once.

Flags:

	--database-url URL
		database to migrate (default $SPOOL_DATABASE_URL)
`, "\n")
}
