package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// QueuesCommand counts jobs by state for every queue that has jobs or is
// paused, and pauses and resumes queues.
type QueuesCommand struct{ m *Main }

// queueJSON is one queue in the JSON output of spool queues.
type queueJSON struct {
	Queue  string      `json:"queue"`
	Counts stateCounts `json:"counts"`
	Total  int64       `json:"total"`
	// PausedSince is when the queue was paused; absent while it runs.
	PausedSince *time.Time `json:"paused_since,omitempty"`
}

// stateCounts are job counts by state; they encode as a JSON object with
// every state, in lifecycle order.
type stateCounts map[backend.State]int64

// MarshalJSON implements json.Marshaler.
func (c stateCounts) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range backend.AllStates {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", st, c[st])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var _ json.Marshaler = stateCounts(nil)

// queueActions are what spool queues does besides counting: queues ACTION
// NAME.
var queueActions = []string{"pause", "resume", "keys"}

// subcommandNames implements subcommander.
func (c *QueuesCommand) subcommandNames() []string { return queueActions }

// Run implements Command.
func (c *QueuesCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	limit := fs.Int("limit", 100, "keys NAME: at most this many keys, busiest first")
	force := fs.Bool("force", false, "pause NAME: pause a queue the store knows nothing of")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	var action string
	switch {
	case len(pos) == 0:
	case slices.Contains(queueActions, pos[0]):
		if len(pos) != 2 {
			return cli.Usagef("queues", "queues %s takes one queue name", pos[0])
		}
		if err := spool.ValidateQueueName(pos[1]); err != nil {
			return cli.Usagef("queues", "%v", err)
		}
		action = pos[0]
	default:
		return cli.Usagef("queues", "unexpected argument %q (want pause NAME, resume NAME or keys NAME)", pos[0])
	}
	if *force && action != "pause" {
		return cli.Usagef("queues", "--force applies to queues pause NAME only")
	}
	if *limit < 1 || *limit > 100000 {
		return cli.Usagef("queues", "--limit must be between 1 and 100000")
	}
	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	switch action {
	case "pause":
		if !*force {
			if err := checkQueueKnown(ctx, client, pos[1]); err != nil {
				return err
			}
		}
		if err := client.QueuePause(ctx, pos[1]); err != nil {
			return explainWriteFault(err, "", true) // pausing a paused queue is no error
		}
		fmt.Fprintf(c.m.Stdout, "queue %s paused: no process claims its jobs until it is resumed; running jobs finish\n", pos[1])
		return nil
	case "resume":
		if err := client.QueueResume(ctx, pos[1]); err != nil {
			return explainWriteFault(err, "", true)
		}
		fmt.Fprintf(c.m.Stdout, "queue %s resumed\n", pos[1])
		return nil
	case "keys":
		use, err := client.FlowKeys(ctx, pos[1], *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return cli.WriteJSON(c.m.Stdout, use)
		}
		return printFlowKeys(c.m.Stdout, use)
	}
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return err
	}
	paused, err := client.QueuesPaused(ctx)
	if err != nil {
		return err
	}
	out := make([]queueJSON, 0, len(stats)+len(paused))
	byName := map[string]int{}
	for _, s := range stats {
		q := queueJSON{Queue: s.Queue, Counts: stateCounts(s.Counts)}
		for _, st := range backend.AllStates {
			q.Total += s.Counts[st]
		}
		byName[s.Queue] = len(out)
		out = append(out, q)
	}
	for _, p := range paused {
		since := p.Since
		i, ok := byName[p.Queue]
		if !ok {
			i = len(out)
			out = append(out, queueJSON{Queue: p.Queue, Counts: stateCounts{}})
		}
		out[i].PausedSince = &since
	}
	slices.SortFunc(out, func(a, b queueJSON) int { return strings.Compare(a.Queue, b.Queue) })
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, out)
	}
	return printQueues(c.m.Stdout, out)
}

// UnknownQueueError refuses to pause a queue the store knows nothing of:
// it has no job in any state and is not paused. The store keeps no list of
// the queues workers serve, so this is what a misspelt name looks like,
// and pausing it would leave the queue meant running.
type UnknownQueueError struct {
	// Queue is the name given.
	Queue string
	// Known are the queues the store knows (with jobs, or paused), sorted.
	Known []string
}

// Error implements error.
func (e *UnknownQueueError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		const shown = 20
		known = strings.Join(e.Known[:min(len(e.Known), shown)], ", ")
		if len(e.Known) > shown {
			known += fmt.Sprintf(" and %d more", len(e.Known)-shown)
		}
	}
	return fmt.Sprintf("queue %q has no jobs (pending, running or finished) and is not paused: is the name right? "+
		"Queues with jobs or paused: %s. To pause it before its first jobs, add --force", e.Queue, known)
}

// checkQueueKnown returns an *UnknownQueueError unless queue has jobs in
// some state or is paused already.
func checkQueueKnown(ctx context.Context, client *spool.Client, queue string) error {
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return err
	}
	paused, err := client.QueuesPaused(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, s := range stats {
		for _, n := range s.Counts {
			if n > 0 {
				known[s.Queue] = true
			}
		}
	}
	for _, p := range paused {
		known[p.Queue] = true
	}
	if known[queue] {
		return nil
	}
	return &UnknownQueueError{Queue: queue, Known: slices.Sorted(maps.Keys(known))}
}

// printQueues prints a table: queue names left-aligned, counts right-aligned.
func printQueues(w io.Writer, queues []queueJSON) error {
	header := []string{"QUEUE"}
	for _, st := range backend.AllStates {
		header = append(header, strings.ToUpper(string(st)))
	}
	header = append(header, "TOTAL", "PAUSED")
	rows := [][]string{header}
	for _, q := range queues {
		row := []string{q.Queue}
		for _, st := range backend.AllStates {
			row = append(row, fmt.Sprint(q.Counts[st]))
		}
		paused := "-"
		if q.PausedSince != nil {
			paused = "since " + q.PausedSince.UTC().Format(time.RFC3339)
		}
		rows = append(rows, append(row, fmt.Sprint(q.Total), paused))
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", widths[i], cell)
			case i == len(row)-1:
				fmt.Fprintf(&b, "  %s", cell)
			default:
				fmt.Fprintf(&b, "  %*s", widths[i], cell)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printFlowKeys prints a queue's flow keys as a table: keys left-aligned,
// counts right-aligned.
func printFlowKeys(w io.Writer, use []spool.FlowKeyUse) error {
	rows := [][]string{{"KEY", "RUNNING", "PENDING", "RATE BUCKET FULL AT"}}
	for _, u := range use {
		key, full := u.Key, "-"
		if key == "" {
			key = "(no key)"
		}
		if u.RateTAT != nil {
			full = u.RateTAT.UTC().Format(time.RFC3339Nano)
		}
		rows = append(rows, []string{key, fmt.Sprint(u.Running), fmt.Sprint(u.Pending), full})
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t  %s\n", width, r[0], r[1], r[2], r[3])
	}
	return tw.Flush()
}

// Usage implements Command.
func (c *QueuesCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool queues [flags]
       spool queues pause NAME [flags]
       spool queues resume NAME [flags]
       spool queues keys NAME [flags]

Counts the jobs of every queue by state, in lifecycle order: available,
scheduled, retryable, running, completed, discarded, cancelled, and the
total, and says which queues are paused and since when. Queues without jobs
are shown only while paused.

pause NAME stops every process from claiming the queue's jobs, from the
moment it commits: each claim checks it in the database. Jobs already
running finish. The pause is stored and survives restarts. resume NAME
undoes it; workers that listen for wake-ups (PostgreSQL, SQLite) start the
waiting jobs at once, others at their next poll. Both are idempotent.

pause NAME refuses a queue the store knows nothing of (no job in any
state, not paused), naming the queues it knows: the store keeps no list of
the queues workers serve, so that is what a misspelt name looks like, and
pausing it would leave the queue meant running. --force pauses it anyway,
to stop a queue before its first jobs arrive.

keys NAME shows the queue's flow keys (docs/flow.md), busiest first: the
jobs of each key running (leases not ended) and pending, and, for a key a
rate limit has started jobs of, when its bucket is full again. Jobs
without a key show as "(no key)".

Flags:

	--json
		print a JSON array of {"queue", "counts": {state: n}, "total",
		"paused_since" (only while paused)}; with keys NAME, of {"key",
		"running", "pending", "rate_tat" (only with a rate state)}
	--limit N
		keys NAME: at most N keys, busiest first (default 100)
	--force
		pause NAME: pause a queue that has no jobs and is not paused
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
