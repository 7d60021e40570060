package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool"
)

// traceLines is how many lines of each error's trace jobs show prints.
const traceLines = 6

// JobsShowCommand shows one job with all its fields.
type JobsShowCommand struct{ m *Main }

// Run implements Command.
func (c *JobsShowCommand) Run(ctx context.Context, args []string) error {
	return runJobsShow(ctx, c.m, c.Usage(), args)
}

// printJob writes every field of a job for people.
func printJob(w io.Writer, j *spool.JobRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	leasedBy := j.LeasedBy
	if leasedBy == "" {
		leasedBy = "-"
	}
	tags := strings.Join(j.Tags, ", ")
	if tags == "" {
		tags = "-"
	}
	unique := "-"
	if j.UniqueKey != "" {
		var held []string
		for _, s := range j.UniqueStates.States() {
			held = append(held, string(s))
		}
		unique = fmt.Sprintf("key %s, held while %s", j.UniqueKey, strings.Join(held, ", "))
	}
	for _, row := range [][2]string{
		{"id", fmt.Sprint(j.ID)},
		{"queue", j.Queue},
		{"kind", j.Kind},
		{"state", string(j.State)},
		{"priority", fmt.Sprint(j.Priority)},
		{"attempt", fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts)},
		{"fence", fmt.Sprint(j.Fence)},
		{"run_at", formatTime(j.RunAt)},
		{"created_at", formatTime(j.CreatedAt)},
		{"attempted_at", formatTimePtr(j.AttemptedAt)},
		{"finalized_at", formatTimePtr(j.FinalizedAt)},
		{"leased_until", formatTimePtr(j.LeasedUntil)},
		{"leased_by", leasedBy},
		{"tags", tags},
		{"unique", unique},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "args:\n%s\n", indentJSON(j.Args, "  "))
	fmt.Fprintf(w, "metadata:\n%s\n", indentJSON(j.Metadata, "  "))
	if len(j.Output) > 0 {
		fmt.Fprintf(w, "output:\n%s\n", indentJSON(j.Output, "  "))
	} else {
		fmt.Fprintln(w, "output: none")
	}
	if len(j.Errors) == 0 {
		fmt.Fprintln(w, "errors: none")
		return nil
	}
	fmt.Fprintf(w, "errors (%d):\n", len(j.Errors))
	for _, e := range j.Errors {
		fmt.Fprintf(w, "  attempt %d at %s: %s\n", e.Attempt, formatTime(e.At), e.Error)
		if e.Trace == "" {
			continue
		}
		lines := strings.Split(strings.TrimRight(e.Trace, "\n"), "\n")
		for i, l := range lines {
			if i == traceLines {
				fmt.Fprintf(w, "    … %d more lines (see --json)\n", len(lines)-traceLines)
				break
			}
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	return nil
}

// indentJSON pretty-prints raw JSON, every line prefixed; invalid or empty
// input is shown as it is.
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return prefix + "(none)"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, prefix, "  "); err != nil {
		return prefix + string(raw)
	}
	return prefix + buf.String()
}

// Usage implements Command.
func (c *JobsShowCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool jobs show [flags] ID

Shows every field of a job: its state and attempts, times, lease, tags, args
and metadata pretty-printed, and its error history with the first lines of
each trace; its durable steps (name, result, when), what it waits for, and
the signals sent to it (docs/durable.md).

Flags:

	--json
		print the job as a JSON object, traces in full
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
