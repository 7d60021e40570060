package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/internal/cli"
)

// QueuesCommand counts jobs by state for every queue that has jobs.
type QueuesCommand struct{ m *Main }

// queueJSON is one queue in the JSON output of spool queues.
type queueJSON struct {
	Queue  string      `json:"queue"`
	Counts stateCounts `json:"counts"`
	Total  int64       `json:"total"`
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

// Run implements Command.
func (c *QueuesCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("queues", "unexpected argument %q", pos[0])
	}
	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return err
	}
	out := make([]queueJSON, len(stats))
	for i, s := range stats {
		q := queueJSON{Queue: s.Queue, Counts: stateCounts(s.Counts)}
		for _, st := range backend.AllStates {
			q.Total += s.Counts[st]
		}
		out[i] = q
	}
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, out)
	}
	return printQueues(c.m.Stdout, out)
}

// printQueues prints a table: queue names left-aligned, counts right-aligned.
func printQueues(w io.Writer, queues []queueJSON) error {
	header := []string{"QUEUE"}
	for _, st := range backend.AllStates {
		header = append(header, strings.ToUpper(string(st)))
	}
	header = append(header, "TOTAL")
	rows := [][]string{header}
	for _, q := range queues {
		row := []string{q.Queue}
		for _, st := range backend.AllStates {
			row = append(row, fmt.Sprint(q.Counts[st]))
		}
		rows = append(rows, append(row, fmt.Sprint(q.Total)))
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
			default:
				fmt.Fprintf(&b, "  %*s", widths[i], cell)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Usage implements Command.
func (c *QueuesCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool queues [flags]

Counts the jobs of every queue by state, in lifecycle order: available,
scheduled, retryable, running, completed, discarded, cancelled, and the total.
Queues without jobs are not shown.

Flags:

	--json
		print a JSON array of {"queue", "counts": {state: n}, "total"}
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
