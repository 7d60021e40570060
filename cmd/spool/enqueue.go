package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/cmd/spool/cli"
)

// EnqueueCommand inserts one job of any kind, with its args given as JSON.
type EnqueueCommand struct{ m *Main }

// Run implements Command.
func (c *EnqueueCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError)
	dbURL := cli.AddDatabaseFlag(fs)
	kind := fs.String("kind", "", "job kind (required)")
	argsFlag := fs.String("args", "{}", "job args as JSON, @FILE, or - for stdin")
	queue := fs.String("queue", "", "queue")
	priority := fs.Int("priority", 0, "priority, 0 runs first")
	maxAttempts := fs.Int("max-attempts", 0, "maximum attempts")
	delay := fs.Duration("delay", 0, "run no earlier than this long from now")
	runAt := fs.String("run-at", "", "run no earlier than this RFC 3339 time")
	var tags cli.StringList
	fs.Var(&tags, "tag", "tag (repeatable)")
	metadata := fs.String("metadata", "", "metadata as a JSON object")
	flowKey := fs.String("flow-key", "", "the job's flow key, counted by its queue's flow rules")
	uniqueKey := fs.String("unique-key", "", "insert only if no job of the kind holds this key")
	uniqueArgs := fs.Bool("unique-args", false, "insert only if no job of the kind with equal args holds its key")
	var uniqueFields, uniqueStates cli.StringList
	fs.Var(&uniqueFields, "unique-field", "args field that makes up the unique key (repeatable)")
	uniqueQueue := fs.Bool("unique-queue", false, "the unique key includes the queue")
	uniquePeriod := fs.Duration("unique-period", 0, "the unique key includes the period the run time falls in")
	fs.Var(&uniqueStates, "unique-state", "finished state in which a job keeps its key (repeatable)")
	debounce := fs.Duration("debounce", 0, "debounce the unique key: run this long after the last insert")
	debounceMax := fs.Duration("debounce-max", 0, "with --debounce, run at the latest this long after a cycle's first insert")
	debounceReplace := fs.Bool("debounce-replace", false, "with --debounce, each insert replaces the pending job's args")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := cli.ParseFlags(fs, args, c.Usage())
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("enqueue", "unexpected argument %q", pos[0])
	}

	// Check everything that can be checked without the database first, so a
	// mistake writes nothing and says which flag is wrong.
	if *kind == "" {
		return cli.Usagef("enqueue", "--kind is required")
	}
	argsJSON, err := c.readArgs(*argsFlag)
	if err != nil {
		return err
	}
	if !json.Valid([]byte(argsJSON)) {
		return cli.Usagef("enqueue", "--args is not valid JSON: %s", jsonSyntaxError(argsJSON))
	}
	opts := &spool.InsertOpts{
		Queue:       *queue,
		MaxAttempts: *maxAttempts,
		Tags:        tags,
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["priority"] {
		*opts = opts.WithPriority(*priority)
	}
	if set["max-attempts"] && *maxAttempts == 0 {
		return cli.Usagef("enqueue", "--max-attempts must be at least 1")
	}
	if *metadata != "" {
		var obj map[string]json.RawMessage
		if !json.Valid([]byte(*metadata)) {
			return cli.Usagef("enqueue", "--metadata is not valid JSON: %s", jsonSyntaxError(*metadata))
		}
		if err := json.Unmarshal([]byte(*metadata), &obj); err != nil || obj == nil {
			return cli.Usagef("enqueue", "--metadata must be a JSON object, like {\"key\": \"value\"}")
		}
		opts.Metadata = json.RawMessage(*metadata)
	}
	if set["delay"] && *runAt != "" {
		return cli.Usagef("enqueue", "--delay and --run-at cannot be used together")
	}
	opts.Delay = *delay
	if *runAt != "" {
		t, err := time.Parse(time.RFC3339, *runAt)
		if err != nil {
			return cli.Usagef("enqueue", "--run-at %q is not an RFC 3339 time like 2030-01-02T15:04:05Z", *runAt)
		}
		opts.RunAt = t
	}
	opts.FlowKey = *flowKey
	if opts.Unique, err = uniqueFlags(*uniqueKey, *uniqueArgs, uniqueFields, *uniqueQueue, *uniquePeriod, uniqueStates, set); err != nil {
		return err
	}
	if opts.Unique, err = debounceFlags(opts, *debounce, *debounceMax, *debounceReplace, set); err != nil {
		return err
	}
	debounced := opts.Unique != nil && opts.Unique.Debounce != nil

	client, closeClient, err := openClient(ctx, c.m, *dbURL)
	if err != nil {
		return err
	}
	defer closeClient()
	res, err := client.Insert(ctx, spool.RawArgs(*kind, json.RawMessage(argsJSON)), opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(c.m.Stdout, struct {
			ID        int64  `json:"id"`
			Kind      string `json:"kind"`
			Queue     string `json:"queue"`
			Duplicate bool   `json:"duplicate"`
			Debounced bool   `json:"debounced,omitempty"`
		}{res.ID, res.Kind, res.Queue, res.Duplicate, debounced && res.Duplicate})
	}
	if res.Duplicate && debounced {
		fmt.Fprintln(c.m.Stdout, res.ID, "debounced")
		return nil
	}
	if res.Duplicate {
		fmt.Fprintln(c.m.Stdout, res.ID, "duplicate")
		return nil
	}
	fmt.Fprintln(c.m.Stdout, res.ID)
	return nil
}

// uniqueFlags builds the unique options the --unique-* flags ask for: nil
// when none is given. The finished states it accepts are the ones a unique
// job may keep its key in; the others always hold it.
func uniqueFlags(key string, byArgs bool, fields []string, byQueue bool, period time.Duration, states []string, set map[string]bool) (*spool.UniqueOpts, error) {
	if !set["unique-key"] && !set["unique-args"] && !set["unique-field"] && !set["unique-queue"] && !set["unique-period"] && !set["unique-state"] {
		return nil, nil
	}
	if set["unique-key"] && key == "" {
		return nil, cli.Usagef("enqueue", "--unique-key must not be empty")
	}
	if period < 0 || (set["unique-period"] && period == 0) {
		return nil, cli.Usagef("enqueue", "--unique-period must be positive, like 1h")
	}
	u := &spool.UniqueOpts{Key: key, ByArgs: byArgs || len(fields) > 0, ArgsFields: fields, ByQueue: byQueue, ByPeriod: period}
	if set["unique-state"] {
		u.States = []spool.JobState{spool.JobStateAvailable, spool.JobStateScheduled, spool.JobStateRetryable, spool.JobStateRunning}
		for _, s := range states {
			switch st := spool.JobState(s); st {
			case spool.JobStateCompleted, spool.JobStateDiscarded, spool.JobStateCancelled:
				u.States = append(u.States, st)
			default:
				return nil, cli.Usagef("enqueue", "--unique-state %q: give completed, discarded or cancelled (pending and running jobs always hold their key)", s)
			}
		}
	}
	return u, nil
}

// debounceFlags adds the --debounce* flags to opts.Unique (made of the
// kind alone when no --unique-* flag is given) and returns it.
func debounceFlags(opts *spool.InsertOpts, window, maxWait time.Duration, replace bool, set map[string]bool) (*spool.UniqueOpts, error) {
	if !set["debounce"] {
		if set["debounce-max"] || set["debounce-replace"] {
			return nil, cli.Usagef("enqueue", "--debounce-max and --debounce-replace need --debounce")
		}
		return opts.Unique, nil
	}
	switch {
	case window <= 0:
		return nil, cli.Usagef("enqueue", "--debounce must be positive, like 2s")
	case maxWait < 0 || (set["debounce-max"] && maxWait == 0):
		return nil, cli.Usagef("enqueue", "--debounce-max must be positive, like 10s")
	case set["unique-state"]:
		return nil, cli.Usagef("enqueue", "--unique-state does not apply to a debounced key")
	case set["delay"] || set["run-at"]:
		return nil, cli.Usagef("enqueue", "--delay and --run-at do not apply with --debounce: the job runs --debounce after the last insert")
	}
	u := opts.Unique
	if u == nil {
		u = &spool.UniqueOpts{}
	}
	u.Debounce = &spool.DebounceOpts{Window: window, MaxWait: maxWait, ReplaceArgs: replace}
	return u, nil
}

// readArgs returns the JSON --args names: the value itself, the contents
// of FILE for @FILE, or standard input for "-". Input is read up to the
// args limit and one byte more, so that an endless or huge stream is
// refused without being held in memory.
func (c *EnqueueCommand) readArgs(v string) (string, error) {
	var (
		r    io.Reader
		from string
	)
	switch {
	case v == "-":
		r, from = c.m.Stdin, "standard input"
		if r == nil {
			r = strings.NewReader("")
		}
	case strings.HasPrefix(v, "@"):
		f, err := os.Open(v[1:])
		if err != nil {
			return "", cli.Usagef("enqueue", "--args %s: %v", v, err)
		}
		defer f.Close()
		r, from = f, v[1:]
	default:
		return v, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, spool.DefaultMaxArgsBytes+1))
	if err != nil {
		return "", fmt.Errorf("enqueue: read --args from %s: %w", from, err)
	}
	if len(b) > spool.DefaultMaxArgsBytes {
		return "", cli.Usagef("enqueue", "--args from %s is over the limit of %d bytes on a job's args", from, spool.DefaultMaxArgsBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", cli.Usagef("enqueue", "--args from %s is empty; give JSON such as {}", from)
	}
	return string(b), nil
}

// jsonSyntaxError describes why s is not valid JSON, with the offset.
func jsonSyntaxError(s string) string {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("%v (at byte %d of %q)", se, se.Offset, s)
	}
	if err != nil {
		return fmt.Sprintf("%v (in %q)", err, s)
	}
	return fmt.Sprintf("%q", s)
}

// Usage implements Command.
func (c *EnqueueCommand) Usage() string {
	return strings.TrimLeft(`
Usage: spool enqueue --kind KIND [flags]

Inserts one job and prints its id. Kinds are not checked: the job waits for
a client that has a worker for its kind.

Flags:

	--kind KIND
		job kind (required)
	--args JSON | @FILE | -
		job args as JSON (default {}); @FILE reads them from FILE and -
		from standard input, up to the 1 MiB limit on args (JSON never
		starts with @, so no value is ambiguous)
	--queue NAME
		queue (default "default")
	--priority N
		priority, 0 (first) to 100 (last) (default 0)
	--max-attempts N
		attempts before the job is discarded, 1 to 1000 (default 25)
	--delay DURATION
		run no earlier than this long from now, e.g. 10s, 5m
	--run-at TIME
		run no earlier than this RFC 3339 time, e.g. 2030-01-02T15:04:05Z
	--tag TAG
		tag the job; repeat for more tags
	--metadata JSON
		a JSON object stored with the job
	--flow-key KEY
		the job's flow key: the key its queue's flow rules (per-key
		limits, rates, order, fair share; docs/flow.md) count it under
	--unique-key KEY
		insert only if no job of this kind holds KEY; otherwise print the
		holder's id followed by "duplicate" and insert nothing
	--unique-args
		the unique key includes all of the args
	--unique-field NAME
		the unique key includes the args field NAME (repeatable)
	--unique-queue
		the unique key includes the queue
	--unique-period DURATION
		the unique key includes the period the run time falls in, e.g. 1h
		for at most one job per hour
	--unique-state STATE
		a finished state (completed, discarded, cancelled) in which a job
		keeps its key; repeat for more. Default: completed only. Pending
		and running jobs always hold their key. Any --unique-* flag makes
		the job unique; see docs/unique.md
	--debounce DURATION
		debounce the unique key (the kind alone without --unique-*
		flags): the job runs DURATION after the last insert; an insert
		while the key's job is pending moves it and prints its id followed
		by "debounced"; one while it runs makes the next job. See
		docs/unique.md#debounce
	--debounce-max DURATION
		with --debounce, the job runs at the latest DURATION after the
		first insert of its cycle, however often inserts come
	--debounce-replace
		with --debounce, each insert replaces the pending job's args
	--json
		print {"id": …, "kind": …, "queue": …, "duplicate": …} instead of
		the bare id ("debounced": true when an insert moved a pending job)
	--database-url URL
		database (default $SPOOL_DATABASE_URL)
`, "\n")
}
