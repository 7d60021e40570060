package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// runJobsShow reads a job with its durable steps, signals and wait, and
// prints them (jobs show).
func runJobsShow(ctx context.Context, m *Main, usage string, args []string) error {
	const name = "jobs show"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := cli.ParseFlags(fs, args, usage)
	if err != nil {
		return err
	}
	id, err := parseJobID(name, pos)
	if err != nil {
		return err
	}
	client, closeClient, err := openClient(ctx, m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	job, err := client.JobGet(ctx, id)
	if err != nil {
		return err
	}
	d, err := client.JobDurable(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(m.Stdout, struct {
			jobJSON
			*spool.JobDurable
		}{toJobJSON(job), d})
	}
	if err := printJob(m.Stdout, job); err != nil {
		return err
	}
	return printDurable(m.Stdout, job, d)
}

// printDurable writes a job's steps, its wait and the signals sent to it.
func printDurable(w io.Writer, j *spool.JobRow, d *spool.JobDurable) error {
	if len(d.Steps) == 0 && len(d.Signals) == 0 && d.WaitSignal == "" {
		_, err := fmt.Fprintln(w, "steps: none")
		return err
	}
	signalled := map[string]bool{}
	for _, s := range d.Signals {
		signalled[s.Name] = true
	}
	if wait := waitText(j, d, signalled); wait != "" {
		fmt.Fprintf(w, "waiting: %s\n", wait)
	}
	fmt.Fprintf(w, "steps (%d):\n", len(d.Steps))
	for _, s := range d.Steps {
		fmt.Fprintf(w, "  %s  %s  (attempt fence %d)\n    %s\n", formatTime(s.At), s.Name, s.Fence, compactJSON(s.Result))
	}
	if len(d.Signals) == 0 {
		_, err := fmt.Fprintln(w, "signals: none")
		return err
	}
	fmt.Fprintf(w, "signals (%d):\n", len(d.Signals))
	for _, s := range d.Signals {
		fmt.Fprintf(w, "  %s  %s\n    %s\n", formatTime(s.At), s.Name, compactJSON(s.Payload))
	}
	return nil
}

// waitText describes what a scheduled job waits for, or "" when it waits
// for nothing of its steps'.
func waitText(j *spool.JobRow, d *spool.JobDurable, signalled map[string]bool) string {
	if j.State != spool.JobStateScheduled || len(d.Steps) == 0 {
		return ""
	}
	if d.WaitSignal != "" && !signalled[d.WaitSignal] {
		return fmt.Sprintf("for signal %q until %s (then AwaitSignal times out)", d.WaitSignal, formatTime(j.RunAt))
	}
	last := d.Steps[len(d.Steps)-1].Name
	if strings.HasPrefix(last, "spool:sleep:") {
		return "asleep until " + formatTime(j.RunAt)
	}
	return ""
}

// compactJSON is raw on one line, at most 200 bytes.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	s := b.String()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// SignalCommand sends a signal to a job.
type SignalCommand struct{ m *Main }

// Run implements Command.
func (c *SignalCommand) Run(ctx context.Context, args []string) error {
	const name = "signal"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	payload := fs.String("payload", "null", "the signal's payload, JSON")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return cli.Usagef(name, "a job id and a signal name expected, got %d arguments", len(pos))
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return cli.Usagef(name, "job id %q is not a positive integer", pos[0])
	}
	if !json.Valid([]byte(*payload)) {
		return cli.Usagef(name, "--payload %q is not JSON (quote a string: --payload '\"yes\"')", *payload)
	}
	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := client.Signal(ctx, id, pos[1], json.RawMessage(*payload))
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, map[string]any{"job_id": id, "signal": pos[1], "first": res.First, "woke": res.Woke})
	}
	switch {
	case !res.First:
		_, err = fmt.Fprintf(c.m.Stdout, "job %d had a signal %q already; the first one stands, this payload was dropped\n", id, pos[1])
	case res.Woke:
		_, err = fmt.Fprintf(c.m.Stdout, "job %d signalled %q: it was waiting for it and is due now\n", id, pos[1])
	default:
		_, err = fmt.Fprintf(c.m.Stdout, "job %d signalled %q: kept until the job awaits it\n", id, pos[1])
	}
	return err
}

// Usage implements Command.
func (c *SignalCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool signal [flags] JOB NAME

Sends the signal NAME to job JOB (docs/durable.md). The first signal of a
name is kept, whether or not the job awaits it yet; later ones are
dropped. A job parked in AwaitSignal for NAME is made due at once.
Example: spool signal 42 approved --payload '{"by":"ann"}'

Flags:

	--payload JSON
		the signal's payload (default null)
	--json
		print the result as JSON
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
