package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// PeriodicCommand lists the periodic jobs the leaders of the store's
// clients recorded there: the definitions live in the applications' code,
// and the store is where a process without them can see them.
type PeriodicCommand struct{ m *Main }

// periodicJSON is one periodic job in the JSON output of spool periodic.
type periodicJSON struct {
	Name      string     `json:"name"`
	Schedule  string     `json:"schedule"`
	Queue     string     `json:"queue"`
	Since     time.Time  `json:"since"`
	LastSlot  *time.Time `json:"last_slot,omitempty"`
	NextSlot  *time.Time `json:"next_slot,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	SeenAt    time.Time  `json:"seen_at"`
	// Stale is true when no leader recorded it for PeriodicStaleAfter.
	Stale bool `json:"stale"`
}

// Run implements Command.
func (c *PeriodicCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("periodic", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 1 || (len(pos) == 1 && pos[0] != "list") {
		return cli.Usagef("periodic", "unexpected argument %q (want list, or nothing)", strings.Join(pos, " "))
	}
	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	recs, err := client.PeriodicRecords(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	out := periodicRows(recs, now)
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(c.m.Stdout, "no periodic jobs recorded: a client records its PeriodicJobs when it leads (they live in the application's code)")
		return err
	}
	return printPeriodic(c.m.Stdout, out, now)
}

// periodicRows are the records as printed, judged stale or not at now.
func periodicRows(recs []spool.PeriodicRecord, now time.Time) []periodicJSON {
	out := make([]periodicJSON, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		out = append(out, periodicJSON{Name: r.Name, Schedule: r.Schedule, Queue: r.Queue, Since: r.Since,
			LastSlot: timeOrNil(r.LastSlot), NextSlot: timeOrNil(r.NextSlot), StartedAt: timeOrNil(r.StartedAt),
			SeenAt: r.SeenAt, Stale: spool.PeriodicStale(r, now)})
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// printPeriodic prints the periodic jobs as a table, times in UTC.
func printPeriodic(w io.Writer, jobs []periodicJSON, now time.Time) error {
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCHEDULE\tQUEUE\tLAST SLOT\tNEXT SLOT\tRAN ON START\tLAST SEEN\t")
	for _, j := range jobs {
		seen := fmt.Sprintf("%s ago", now.Sub(j.SeenAt).Round(time.Second))
		if j.Stale {
			seen += " (stale: no leader declares it)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", j.Name, j.Schedule, j.Queue, at(j.LastSlot), at(j.NextSlot), at(j.StartedAt), seen)
	}
	return tw.Flush()
}

// Usage implements Command.
func (c *PeriodicCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool periodic [list] [flags]

Lists the periodic jobs recorded in the database, by name: each one's
schedule, queue, last slot fired, next slot, last run on start, and when a
leader last recorded it. Periodic jobs are defined in the applications'
code (Config.PeriodicJobs); the client that leads records every one it
declares when it starts leading, after it fires a slot, and every minute.
A job no leader recorded for 5 minutes is marked stale: no running client
that leads declares it (removed, renamed, or no client runs). Records are
never deleted.

Flags:

	--json
		print a JSON array of {"name", "schedule", "queue", "since",
		"last_slot", "next_slot", "started_at" (each only when set),
		"seen_at", "stale"}
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
