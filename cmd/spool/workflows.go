package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// WorkflowsCommand dispatches spool workflows list, show, cancel and retry.
type WorkflowsCommand struct{ m *Main }

func (c *WorkflowsCommand) subcommands() map[string]cli.Command {
	return map[string]cli.Command{
		"list":   &groupCommand{m: c.m, name: "workflows list", run: c.list},
		"show":   &groupCommand{m: c.m, name: "workflows show", id: true, run: c.show},
		"cancel": &groupCommand{m: c.m, name: "workflows cancel", id: true, run: c.cancel},
		"retry":  &groupCommand{m: c.m, name: "workflows retry", id: true, run: c.retry},
	}
}

// subcommandNames implements subcommander.
func (c *WorkflowsCommand) subcommandNames() []string {
	return slices.Sorted(maps.Keys(c.subcommands()))
}

// Run implements cli.Command.
func (c *WorkflowsCommand) Run(ctx context.Context, args []string) error {
	return dispatch(ctx, "workflows", c.Usage(), c.subcommands(), args)
}

// Usage implements cli.Command.
func (c *WorkflowsCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool workflows <subcommand> [arguments] [flags]

Subcommands:

	list          list workflows, newest first, with their tasks' counts by state
	show ID       show a workflow's tasks (state, dependencies) and its edges
	cancel ID     cancel every task of a workflow that is not finished
	retry ID      run a finished workflow's discarded and cancelled tasks
	              again, each after its retried dependencies

Flags: --database-url URL, --json (list and show), --limit N (list).
Workflows are inserted by the application (spool.NewWorkflow,
Client.InsertWorkflow); docs/workflows.md.
`, "\n")
}

func (c *WorkflowsCommand) list(ctx context.Context, client *spool.Client, _ int64, g *groupCommand) error {
	ws, err := client.Workflows(ctx, 0, g.limit)
	if err != nil {
		return err
	}
	if g.json {
		if ws == nil {
			ws = []*spool.WorkflowSummary{}
		}
		return cli.WriteJSON(c.m.Stdout, ws)
	}
	if len(ws) == 0 {
		_, err := fmt.Fprintln(c.m.Stdout, "no workflows")
		return err
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTASKS\tSTATES\tCREATED\t")
	for _, w := range ws {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t\n", w.ID, w.Name, w.Tasks, wfStateCounts(w.Counts), w.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// wfStateCounts prints counts by state in lifecycle order ("2 waiting, 1 completed").
func wfStateCounts(counts map[backend.State]int64) string {
	var parts []string
	for _, s := range backend.AllStates {
		if n := counts[s]; n > 0 {
			parts = append(parts, strconv.FormatInt(n, 10)+" "+string(s))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func (c *WorkflowsCommand) show(ctx context.Context, client *spool.Client, id int64, g *groupCommand) error {
	d, err := client.Workflow(ctx, id)
	if err != nil {
		return err
	}
	if g.json {
		return cli.WriteJSON(c.m.Stdout, d)
	}
	return printWorkflow(c.m.Stdout, d)
}

// printWorkflow prints a workflow's tasks with their dependencies.
func printWorkflow(w io.Writer, d *spool.WorkflowDetail) error {
	names := map[int64]string{}
	for _, j := range d.Jobs {
		names[j.ID] = j.WorkflowTask
	}
	deps := map[int64][]string{}
	for _, e := range d.Edges {
		dep := names[e.Parent]
		if e.OnFail == backend.DepFailDone {
			dep += " (any end)"
		}
		deps[e.Child] = append(deps[e.Child], dep)
	}
	fmt.Fprintf(w, "workflow %d %q: %d tasks, %s\n\n", d.ID, d.Name, d.Tasks, wfStateCounts(d.Counts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tJOB\tKIND\tQUEUE\tSTATE\tWAITS ON\tAFTER\t")
	for _, j := range d.Jobs {
		after := strings.Join(deps[j.ID], ", ")
		if after == "" {
			after = "-"
		}
		waits := "-"
		if j.State == backend.StateWaiting {
			waits = strconv.Itoa(j.DepsLeft)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", j.WorkflowTask, j.ID, j.Kind, j.Queue, j.State, waits, after)
	}
	return tw.Flush()
}

func (c *WorkflowsCommand) cancel(ctx context.Context, client *spool.Client, id int64, _ *groupCommand) error {
	n, err := client.WorkflowCancel(ctx, id)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "cancelled %d tasks of workflow %d\n", n, id)
	return err
}

func (c *WorkflowsCommand) retry(ctx context.Context, client *spool.Client, id int64, _ *groupCommand) error {
	n, err := client.WorkflowRetry(ctx, id)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "retried %d tasks of workflow %d\n", n, id)
	return err
}

// BatchesCommand dispatches spool batches list, show and retry.
type BatchesCommand struct{ m *Main }

func (c *BatchesCommand) subcommands() map[string]cli.Command {
	return map[string]cli.Command{
		"list":  &groupCommand{m: c.m, name: "batches list", run: c.list},
		"show":  &groupCommand{m: c.m, name: "batches show", id: true, run: c.show},
		"retry": &groupCommand{m: c.m, name: "batches retry", id: true, run: c.retry},
	}
}

// subcommandNames implements subcommander.
func (c *BatchesCommand) subcommandNames() []string { return slices.Sorted(maps.Keys(c.subcommands())) }

// Run implements cli.Command.
func (c *BatchesCommand) Run(ctx context.Context, args []string) error {
	return dispatch(ctx, "batches", c.Usage(), c.subcommands(), args)
}

// Usage implements cli.Command.
func (c *BatchesCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool batches <subcommand> [arguments] [flags]

Subcommands:

	list          list batches, newest first, with their progress
	show ID       show a batch's progress, callbacks and members
	retry ID      retry a batch's discarded members (its counts and
	              callbacks, settled once, stay as they are)

Flags: --database-url URL, --json, --limit N (list; show: members shown).
Batches are inserted by the application (Client.InsertBatch);
docs/workflows.md.
`, "\n")
}

func (c *BatchesCommand) retry(ctx context.Context, client *spool.Client, id int64, _ *groupCommand) error {
	res, err := client.BatchRetry(ctx, id)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.m.Stdout, "retried %d discarded members of batch %d (%d left: their unique key is held)\n", res.Changed, id, res.UniqueConflicts)
	return err
}

// batchStatus says where a batch is: open, running, or finished.
func batchStatus(b *spool.Batch) string {
	switch {
	case b.FinishedAt != nil:
		return "finished " + b.FinishedAt.UTC().Format(time.RFC3339)
	case !b.Sealed:
		return "open"
	}
	return "sealed, running"
}

func (c *BatchesCommand) list(ctx context.Context, client *spool.Client, _ int64, g *groupCommand) error {
	bs, err := client.Batches(ctx, 0, g.limit)
	if err != nil {
		return err
	}
	if g.json {
		if bs == nil {
			bs = []*spool.Batch{}
		}
		return cli.WriteJSON(c.m.Stdout, bs)
	}
	if len(bs) == 0 {
		_, err := fmt.Fprintln(c.m.Stdout, "no batches")
		return err
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tMEMBERS\tCOMPLETED\tDISCARDED\tCANCELLED\tSTATUS\t")
	for _, b := range bs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t\n", b.ID, b.Name, b.Total, b.Completed, b.Discarded, b.Cancelled, batchStatus(b))
	}
	return tw.Flush()
}

func (c *BatchesCommand) show(ctx context.Context, client *spool.Client, id int64, g *groupCommand) error {
	b, err := client.Batch(ctx, id)
	if err != nil {
		return err
	}
	members, err := client.BatchMembers(ctx, id, 0, g.limit)
	if err != nil {
		return err
	}
	if g.json {
		if members == nil {
			members = []*spool.JobRow{}
		}
		return cli.WriteJSON(c.m.Stdout, struct {
			*spool.Batch
			Members []*spool.JobRow `json:"members"`
		}{b, members})
	}
	w := c.m.Stdout
	fmt.Fprintf(w, "batch %d %q: %s\n", b.ID, b.Name, batchStatus(b))
	fmt.Fprintf(w, "members: %d (%d completed, %d discarded, %d cancelled, %d not final)\n", b.Total, b.Completed, b.Discarded, b.Cancelled, b.Total-b.Completed-b.Discarded-b.Cancelled)
	for _, cb := range []struct {
		name string
		id   int64
	}{{"on success", b.OnSuccess}, {"on failure", b.OnFailure}, {"on complete", b.OnComplete}} {
		if cb.id != 0 {
			fmt.Fprintf(w, "callback %s: job %d\n", cb.name, cb.id)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tQUEUE\tSTATE\tATTEMPT\t")
	for _, j := range members {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t\n", j.ID, j.Kind, j.Queue, j.State, j.Attempt, j.MaxAttempts)
	}
	return tw.Flush()
}

// groupCommand is one subcommand of workflows or batches: its flags, an
// optional id argument, and what it does with a client.
type groupCommand struct {
	m     *Main
	name  string
	id    bool
	run   func(ctx context.Context, client *spool.Client, id int64, g *groupCommand) error
	json  bool
	limit int
}

// Run implements cli.Command.
func (g *groupCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(g.name, flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	fs.BoolVar(&g.json, "json", false, "print JSON")
	fs.IntVar(&g.limit, "limit", 100, "how many to list")
	pos, err := cli.ParseFlags(fs, args, g.Usage())
	if err != nil {
		return err
	}
	var id int64
	switch {
	case g.id && len(pos) != 1:
		return cli.Usagef(g.name, "one id expected, got %d arguments", len(pos))
	case g.id:
		if id, err = strconv.ParseInt(pos[0], 10, 64); err != nil || id < 1 {
			return cli.Usagef(g.name, "id %q is not a positive integer", pos[0])
		}
	case len(pos) > 0:
		return cli.Usagef(g.name, "unexpected argument %q", pos[0])
	}
	if g.limit < 1 {
		return cli.Usagef(g.name, "--limit %d must be at least 1", g.limit)
	}
	client, closeClient, err := openClient(ctx, g.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	return g.run(ctx, client, id, g)
}

// Usage implements cli.Command.
func (g *groupCommand) Usage() string {
	arg := ""
	if g.id {
		arg = " ID"
	}
	return "Usage: spool " + g.name + arg + " [--database-url URL] [--json] [--limit N]\n"
}

// dispatch runs a subcommand of cmd.
func dispatch(ctx context.Context, cmd, usage string, subs map[string]cli.Command, args []string) error {
	names := strings.Join(slices.Sorted(maps.Keys(subs)), ", ")
	if len(args) == 0 {
		return cli.Usagef(cmd, "missing subcommand (%s)", names)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		return &cli.HelpRequest{Usage: usage}
	}
	sub, ok := subs[args[0]]
	if !ok {
		return cli.Usagef(cmd, "unknown subcommand %q (want %s)", args[0], names)
	}
	return sub.Run(ctx, args[1:])
}
