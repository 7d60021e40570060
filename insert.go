package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/backend"
)

// Limits enforced on every insert (and, for SQL enqueue, by the database).
const (
	MinPriority       = 0   // runs first
	MaxPriority       = 100 // runs last
	MaxMaxAttempts    = 1000
	DefaultMaxAttempt = 25
	MaxTags           = 32
	MaxKindLength     = 255
	// DefaultMaxArgsBytes is the default limit on encoded args: 1 MiB.
	DefaultMaxArgsBytes = 1 << 20
)

// validName reports whether s is 1 to maxLen bytes of a-z A-Z 0-9 _ and the
// bytes of extra, its first byte not one of leadOut. Queue names and tags
// are checked on every insert; a regexp match cost 2.6% of a steady
// inserting client's CPU.
func validName(s string, maxLen int, extra, leadOut string) bool {
	if len(s) == 0 || len(s) > maxLen || strings.IndexByte(leadOut, s[0]) >= 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// validQueue matches ^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$.
func validQueue(s string) bool { return validName(s, 128, ".-", ".-") }

// validTag matches ^[a-zA-Z0-9_.:-]{1,64}$.
func validTag(s string) bool { return validName(s, 64, ".:-", "") }

// InsertOpts are per-job insert options. Zero values take the args type's
// InsertOpts (if it has any), then the defaults.
type InsertOpts struct {
	// MaxAttempts is how many times the job may run before it is discarded,
	// 1 to 1000. Defaults to 25.
	MaxAttempts int
	// Metadata is a JSON object stored with the job, for the user's own use.
	Metadata json.RawMessage
	// Priority orders jobs within a queue: 0 runs first, 100 last. Defaults to 0.
	Priority int
	// Queue is the queue to insert into. Defaults to "default".
	Queue string
	// RunAt schedules the job for a time; it runs no earlier. Defaults to now.
	RunAt time.Time
	// Delay schedules the job this long after the database's now. Ignored
	// when RunAt is set.
	Delay time.Duration
	// Tags label the job (at most 32, each 1 to 64 of a-z A-Z 0-9 _ . : -).
	Tags []string
	// Unique, when set, inserts the job only if no job holds the same unique
	// key; see UniqueOpts.
	Unique *UniqueOpts
	// FlowKey is the job's flow key, counted by its queue's Flow rules
	// (per-key limits, order, rates, fair share): 1 to 255 bytes of
	// printable UTF-8. Empty takes the args' FlowKey method when the args
	// type has one (JobArgsWithFlowKey), else no key.
	FlowKey string

	// priorityIsSet distinguishes an explicit 0 from "not set" when merging.
	priorityIsSet bool
}

// WithPriority returns a copy of o with the priority set explicitly, so that
// 0 overrides an args type's own default.
func (o InsertOpts) WithPriority(p int) InsertOpts {
	o.Priority, o.priorityIsSet = p, true
	return o
}

// InsertManyParams is one job of an InsertMany call.
type InsertManyParams struct {
	Args       JobArgs
	InsertOpts *InsertOpts
}

// InsertResult describes an inserted job or, when Duplicate is set, the
// unique job that already held the key (nothing was inserted; ID is that
// job's; Kind and Queue are the ones asked for).
type InsertResult struct {
	ID        int64
	Kind      string
	Queue     string
	Duplicate bool
}

// Insert validates and inserts one job. On any validation error nothing is
// written and the error is an *InvalidJobError. When the connection to the
// database fails, the error matches ErrNotWritten (retrying is safe) or
// ErrOutcomeUnknown (the job may have been stored; see docs/guarantees.md).
// An insert the store refused without writing because it cannot be reached
// for now (ErrUnavailable with ErrNotWritten, such as a database with no
// connection free) is tried 3 times within about 0.2 s before that error
// is returned.
func (c *Client) Insert(ctx context.Context, args JobArgs, opts *InsertOpts) (*InsertResult, error) {
	res, err := c.insert(ctx, nil, []InsertManyParams{{Args: args, InsertOpts: opts}})
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// InsertTx inserts one job inside the caller's transaction: the job becomes
// visible to workers when the transaction commits and never runs if it rolls
// back. For PostgreSQL tx is a pgx.Tx.
func (c *Client) InsertTx(ctx context.Context, tx any, args JobArgs, opts *InsertOpts) (*InsertResult, error) {
	if tx == nil {
		return nil, fmt.Errorf("insert job: %w: nil transaction", ErrTxType)
	}
	res, err := c.insert(ctx, tx, []InsertManyParams{{Args: args, InsertOpts: opts}})
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// InsertMany validates every job, then inserts them all in one statement and
// returns their ids in order. If any job is invalid, none is written.
func (c *Client) InsertMany(ctx context.Context, params []InsertManyParams) ([]InsertResult, error) {
	return c.insert(ctx, nil, params)
}

// InsertManyTx is InsertMany inside the caller's transaction.
func (c *Client) InsertManyTx(ctx context.Context, tx any, params []InsertManyParams) ([]InsertResult, error) {
	if tx == nil {
		return nil, fmt.Errorf("insert jobs: %w: nil transaction", ErrTxType)
	}
	return c.insert(ctx, tx, params)
}

// InsertManyFast is InsertMany for bulk loads that need no ids: it returns
// only the count, which lets the backend use its fastest path (COPY in
// PostgreSQL, about 1.5x the rows per second of InsertMany at 10,000 rows).
func (c *Client) InsertManyFast(ctx context.Context, params []InsertManyParams) (int, error) {
	return c.insertFast(ctx, nil, params)
}

// InsertManyFastTx is InsertManyFast inside the caller's transaction.
func (c *Client) InsertManyFastTx(ctx context.Context, tx any, params []InsertManyParams) (int, error) {
	if tx == nil {
		return 0, fmt.Errorf("insert jobs: %w: nil transaction", ErrTxType)
	}
	return c.insertFast(ctx, tx, params)
}

func (c *Client) insert(ctx context.Context, tx any, params []InsertManyParams) ([]InsertResult, error) {
	rows, res, err := c.insertRows(ctx, tx, params, false)
	if err != nil {
		return nil, err
	}
	out := make([]InsertResult, len(rows))
	for i, r := range rows {
		out[i] = InsertResult{ID: res.IDs[i], Kind: r.Kind, Queue: r.Queue}
		if res.Duplicates != nil {
			out[i].Duplicate = res.Duplicates[i]
		}
	}
	return out, nil
}

func (c *Client) insertFast(ctx context.Context, tx any, params []InsertManyParams) (int, error) {
	_, res, err := c.insertRows(ctx, tx, params, true)
	if err != nil {
		return 0, err
	}
	return res.Count, nil
}

// insertRows runs the client's insert middleware around writeRows.
func (c *Client) insertRows(ctx context.Context, tx any, params []InsertManyParams, noIDs bool) ([]*backend.JobInsertParams, *backend.JobInsertManyResult, error) {
	mws := c.config.InsertMiddleware
	if len(mws) == 0 {
		return c.writeRows(ctx, tx, params, noIDs)
	}
	var (
		rows   []*backend.JobInsertParams
		res    *backend.JobInsertManyResult
		called bool
	)
	var call func(i int, ctx context.Context, params []InsertManyParams) error
	call = func(i int, ctx context.Context, params []InsertManyParams) error {
		if i < len(mws) {
			return mws[i](ctx, params, func(ctx context.Context, params []InsertManyParams) error { return call(i+1, ctx, params) })
		}
		if len(params) != len(rows) {
			return fmt.Errorf("insert jobs: %w: insert middleware passed on %d jobs of %d; it may change jobs, not add or drop them", ErrInvalidConfig, len(params), len(rows))
		}
		called = true
		var err error
		rows, res, err = c.writeRows(ctx, tx, params, noIDs)
		return err
	}
	rows = make([]*backend.JobInsertParams, len(params)) // the count the middleware must keep
	if err := call(0, ctx, params); err != nil {
		return nil, nil, err
	}
	if !called {
		return nil, nil, fmt.Errorf("insert jobs: %w: insert middleware returned without inserting or refusing the jobs", ErrInvalidConfig)
	}
	return rows, res, nil
}

// writeRows validates all jobs, writes them, and wakes local producers.
func (c *Client) writeRows(ctx context.Context, tx any, params []InsertManyParams, noIDs bool) ([]*backend.JobInsertParams, *backend.JobInsertManyResult, error) {
	rows := make([]*backend.JobInsertParams, len(params))
	var deb *backend.JobDebounceParams
	for i, p := range params {
		row, d, err := c.buildInsert(p.Args, p.InsertOpts)
		if err == nil && d != nil && len(params) > 1 {
			err = invalid("unique", nil, "a debounced job is inserted alone, not in a call of %d jobs", len(params))
		}
		if err != nil {
			if len(params) > 1 {
				return nil, nil, fmt.Errorf("insert jobs: job %d: %w", i, err)
			}
			return nil, nil, fmt.Errorf("insert job: %w", err)
		}
		rows[i], deb = row, d
	}
	if deb != nil {
		res, err := c.insertDebounced(ctx, tx, deb)
		return rows, res, err
	}
	send, repeats := foldRepeatedKeys(rows)
	res, err := c.jobInsertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: send, NoIDs: noIDs && repeats == nil})
	if err != nil {
		return nil, nil, err
	}
	if repeats != nil {
		res = unfoldRepeatedKeys(res, repeats)
	}
	if tx == nil {
		c.engine.WakeInserted(rows)
	}
	c.observers.inserted(send)
	return rows, res, nil
}

// An insert of its own (not in the caller's transaction) that the store
// refused before writing anything because it could not be reached for now
// (ErrUnavailable with ErrNotWritten: no connection slot free, a connection
// refused) is tried again, insertTries times in all, after waits of about
// insertFirstWait, doubling: a brief shortage of connections does not fail
// the caller's request, and a long one fails it in well under a second.
// Nothing else is tried again: an insert whose outcome is unknown may have
// been written, and one in the caller's transaction is the caller's to
// retry with the transaction.
const (
	insertTries     = 3
	insertFirstWait = 50 * time.Millisecond
)

// jobInsertMany is the backend's JobInsertMany, tried again as above.
func (c *Client) jobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	wait := insertFirstWait
	for try := 1; ; try++ {
		res, err := c.backend.JobInsertMany(ctx, p)
		if err == nil || p.Tx != nil || !errors.Is(err, ErrNotWritten) || !errors.Is(err, ErrUnavailable) {
			return res, err
		}
		if try == insertTries {
			return nil, fmt.Errorf("insert: store unavailable on %d tries: %w", try, err)
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("insert: %w while waiting to try again; last try: %w", context.Cause(ctx), err)
		case <-t.C:
		}
		wait *= 2
	}
}

// foldRepeatedKeys drops the jobs of a call whose unique key an earlier job
// of the same call has (they are duplicates of it) and returns the jobs to
// send with, for each job of rows, the index in send of the job that stands
// for it. repeats is nil when no key repeats.
func foldRepeatedKeys(rows []*backend.JobInsertParams) (send []*backend.JobInsertParams, repeats []int) {
	var first map[string]int
	for i, r := range rows {
		if r.UniqueKey == "" {
			continue
		}
		if first == nil {
			first = map[string]int{}
		}
		if _, ok := first[r.UniqueKey]; ok {
			repeats = make([]int, len(rows))
			break
		}
		first[r.UniqueKey] = i
	}
	if repeats == nil {
		return rows, nil
	}
	clear(first)
	for i, r := range rows {
		if r.UniqueKey != "" {
			if at, ok := first[r.UniqueKey]; ok {
				repeats[i] = -1 - at // a repeat of send[at]
				continue
			}
			first[r.UniqueKey] = len(send)
		}
		repeats[i] = len(send)
		send = append(send, r)
	}
	return send, repeats
}

// unfoldRepeatedKeys maps the result for the folded jobs back to every job
// of the call: a repeat gets the id of the job it repeats and is a duplicate.
func unfoldRepeatedKeys(res *backend.JobInsertManyResult, repeats []int) *backend.JobInsertManyResult {
	out := &backend.JobInsertManyResult{Count: res.Count, IDs: make([]int64, len(repeats)), Duplicates: make([]bool, len(repeats))}
	for i, at := range repeats {
		if at < 0 {
			out.IDs[i], out.Duplicates[i] = res.IDs[-1-at], true
			continue
		}
		out.IDs[i] = res.IDs[at]
		if res.Duplicates != nil {
			out.Duplicates[i] = res.Duplicates[at]
		}
	}
	return out
}

// buildInsert merges options and validates one job.
// deb is not nil for a debounced job (UniqueOpts.Debounce).
func (c *Client) buildInsert(args JobArgs, opts *InsertOpts) (row *backend.JobInsertParams, deb *backend.JobDebounceParams, err error) {
	if args == nil {
		return nil, nil, invalid("args", nil, "args are nil")
	}
	kind := args.Kind()
	if err := ValidateKind(kind); err != nil {
		return nil, nil, err
	}
	if c.config.Workers != nil && !c.config.AllowUnknownKinds && !c.config.Workers.has(kind) {
		return nil, nil, invalid("kind", ErrUnknownKind, "no worker registered for kind %q (set Config.AllowUnknownKinds to insert it anyway)", kind)
	}
	o := InsertOpts{}
	if withOpts, ok := args.(JobArgsWithInsertOpts); ok {
		o = withOpts.InsertOpts()
	}
	if opts != nil {
		o = mergeOpts(o, *opts)
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		return nil, nil, invalid("args", fmt.Errorf("%w: %v", ErrArgsEncode, err), "cannot encode args of kind %q: %v", kind, err)
	}
	if len(encoded) > c.config.MaxArgsBytes {
		return nil, nil, invalid("args", ErrArgsTooLarge, "args of kind %q encode to %d bytes, over the limit of %d", kind, len(encoded), c.config.MaxArgsBytes)
	}
	if why := checkArgsStorable(args, encoded); why != "" {
		return nil, nil, invalid("args", ErrArgsUnstorable, "args of kind %q %s", kind, why)
	}
	if o.Queue == "" {
		o.Queue = DefaultQueue
	}
	if err := ValidateQueueName(o.Queue); err != nil {
		return nil, nil, err
	}
	if o.Priority < MinPriority || o.Priority > MaxPriority {
		return nil, nil, invalid("priority", nil, "priority %d is out of range %d..%d", o.Priority, MinPriority, MaxPriority)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempt
	}
	if o.MaxAttempts < 1 || o.MaxAttempts > MaxMaxAttempts {
		return nil, nil, invalid("max_attempts", nil, "max attempts %d is out of range 1..%d", o.MaxAttempts, MaxMaxAttempts)
	}
	if len(o.Tags) > MaxTags {
		return nil, nil, invalid("tags", nil, "%d tags, at most %d allowed", len(o.Tags), MaxTags)
	}
	for _, t := range o.Tags {
		if !validTag(t) {
			return nil, nil, invalid("tags", nil, "tag %q must be 1 to 64 of a-z A-Z 0-9 _ . : -", t)
		}
	}
	var meta json.RawMessage
	if len(o.Metadata) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(o.Metadata, &obj); err != nil || obj == nil {
			return nil, nil, invalid("metadata", nil, "metadata must be a JSON object")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, o.Metadata); err != nil {
			return nil, nil, invalid("metadata", nil, "metadata must be a JSON object")
		}
		meta = buf.Bytes()
		if why := checkStorableJSON(meta); why != "" {
			return nil, nil, invalid("metadata", nil, "metadata must not %s", why)
		}
	}
	if o.Delay < 0 {
		return nil, nil, invalid("run_at", nil, "delay %s is negative: a job runs at the earliest now", o.Delay)
	}
	row = &backend.JobInsertParams{
		Queue:       o.Queue,
		Kind:        kind,
		Args:        encoded,
		Priority:    int16(o.Priority),
		Delay:       o.Delay,
		MaxAttempts: int16(o.MaxAttempts),
		Tags:        o.Tags,
		Metadata:    meta,
	}
	if !o.RunAt.IsZero() {
		if err := checkRunAt(o.RunAt); err != nil {
			return nil, nil, err
		}
		at := o.RunAt
		row.RunAt = &at
		row.Delay = 0
	}
	if o.FlowKey == "" {
		if k, ok := args.(JobArgsWithFlowKey); ok {
			o.FlowKey = k.FlowKey()
		}
	}
	if o.FlowKey != "" {
		if err := checkFlowKey(o.FlowKey); err != nil {
			return nil, nil, invalid("flow_key", nil, "%v", err)
		}
		row.FlowKey = o.FlowKey
	}
	if o.Unique != nil {
		at := time.Now().Add(row.Delay)
		if row.RunAt != nil {
			at = *row.RunAt
		}
		if row.UniqueKey, row.UniqueStates, err = uniqueKey(o.Unique, kind, o.Queue, encoded, at); err != nil {
			return nil, nil, err
		}
		if deb, err = debounceParams(o.Unique, row.UniqueKey, &o); err != nil {
			return nil, nil, err
		}
		if deb != nil {
			// The debounce table holds the key, not the unique index: a
			// running job and the next cycle's pending one share it.
			row.UniqueKey, row.UniqueStates = "", 0
			row.Delay = backend.DebounceFirstDelay(deb.Window, deb.MaxWait)
			deb.Job = row
		}
	}
	return row, deb, nil
}

func mergeOpts(base, over InsertOpts) InsertOpts {
	if over.MaxAttempts != 0 {
		base.MaxAttempts = over.MaxAttempts
	}
	if len(over.Metadata) > 0 {
		base.Metadata = over.Metadata
	}
	if over.Priority != 0 || over.priorityIsSet {
		base.Priority = over.Priority
	}
	if over.Queue != "" {
		base.Queue = over.Queue
	}
	if !over.RunAt.IsZero() {
		base.RunAt = over.RunAt
	}
	if over.Delay != 0 {
		base.Delay = over.Delay
	}
	if over.Tags != nil {
		base.Tags = over.Tags
	}
	if over.Unique != nil {
		base.Unique = over.Unique
	}
	if over.FlowKey != "" {
		base.FlowKey = over.FlowKey
	}
	return base
}

// ValidateQueueName checks a queue name: 1 to 128 characters of a-z A-Z 0-9
// _ . -, not starting with . or -. It returns an *InvalidJobError.
func ValidateQueueName(name string) error {
	if !validQueue(name) {
		return invalid("queue", nil, "queue name %q must be 1 to 128 of a-z A-Z 0-9 _ . -, not starting with . or -", name)
	}
	return nil
}

// ValidateKind checks a job kind: 1 to MaxKindLength bytes of printable
// characters of valid UTF-8. It returns an *InvalidJobError.
func ValidateKind(kind string) error {
	if kind == "" || len(kind) > MaxKindLength || !printable(kind) || !utf8.ValidString(kind) {
		return invalid("kind", nil, "kind %q must be 1 to %d printable characters of valid UTF-8", kind, MaxKindLength)
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
