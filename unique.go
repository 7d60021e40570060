package spool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/spoolq/spool/backend"
)

// UniqueOpts makes an insert unique: while a job of the same kind with the
// same key holds it, inserting another inserts nothing and returns the
// holder, with InsertResult.Duplicate set. The key is made of the kind and of
// what the fields below choose; a UniqueOpts with none of them set allows one
// job of the kind at a time. The store enforces the key with a unique index,
// so concurrent inserts from any number of processes make one job.
// docs/unique.md has the details.
type UniqueOpts struct {
	// ByArgs adds the job's args to the key: all of them, or only the
	// top-level fields named in ArgsFields (by their JSON names; a field
	// missing from the args counts as null).
	ByArgs     bool
	ArgsFields []string
	// Key adds an explicit key of the caller's choice (at most 1,024 bytes).
	Key string
	// ByQueue adds the queue: jobs in different queues never collide.
	ByQueue bool
	// ByPeriod adds the period the job's run time falls in (its RunAt, or
	// the client's clock at insert plus Delay), counted in whole periods
	// since the Unix epoch: with an hour, one job per kind and hour.
	ByPeriod time.Duration
	// States are the states in which a job holds its key. They must include
	// available, scheduled, retryable and running (a job moves among those
	// by itself); the finished states are a choice. Nil means those four and
	// completed: a completed job keeps its key until retention removes it,
	// while a cancelled or discarded one frees it.
	States []JobState
	// Debounce, when set, makes the key a debounced one (trailing edge):
	// an insert that finds the key's job still pending (available,
	// scheduled or retryable) inserts nothing and moves that job's run time
	// to now plus Window, never beyond its first insert plus MaxWait; an
	// insert that finds it running (or finished) starts a new cycle with a
	// new job, which runs Window after it. States must be nil, and RunAt
	// and Delay zero, with Debounce; a debounced job is inserted alone (not
	// within an InsertMany of several jobs). docs/unique.md#debounce.
	Debounce *DebounceOpts
}

// DebounceOpts are the settings of a debounced unique key.
type DebounceOpts struct {
	// Window is how long after the last insert the job runs (> 0).
	Window time.Duration
	// MaxWait bounds how far the inserts of one cycle can push it: the job
	// runs at the latest MaxWait after the cycle's first insert, however
	// often inserts come. Zero means no bound (a steady stream of inserts
	// then keeps the job waiting).
	MaxWait time.Duration
	// ReplaceArgs makes each insert replace the pending job's args with its
	// own, so the job runs with the last args; otherwise it keeps the first.
	ReplaceArgs bool
}

// debounceParams checks u.Debounce and returns what the backend needs,
// with key the job's unique key; nil when u has no Debounce.
func debounceParams(u *UniqueOpts, key string, o *InsertOpts) (*backend.JobDebounceParams, error) {
	d := u.Debounce
	if d == nil {
		return nil, nil
	}
	switch {
	case d.Window <= 0:
		return nil, invalid("unique", nil, "debounce window %s must be positive", d.Window)
	case d.MaxWait < 0:
		return nil, invalid("unique", nil, "debounce max wait %s is negative", d.MaxWait)
	case u.States != nil:
		return nil, invalid("unique", nil, "unique States do not apply to a debounced key: it is held by its pending job only")
	case !o.RunAt.IsZero() || o.Delay != 0:
		return nil, invalid("run_at", nil, "a debounced job takes no RunAt or Delay: it runs Window after the last insert")
	}
	return &backend.JobDebounceParams{Key: key, Window: d.Window, MaxWait: d.MaxWait, ReplaceArgs: d.ReplaceArgs}, nil
}

// UniqueKeyMaxBytes limits UniqueOpts.Key.
const UniqueKeyMaxBytes = 1024

// uniqueStatesDefault is UniqueOpts.States when nil.
var uniqueStatesDefault = backend.UniqueStatesRequired | backend.UniqueStatesOf(backend.StateCompleted)

// uniqueKeyVersion prefixes every hashed key, so that a change in the
// encoding below can never collide with keys already stored.
const uniqueKeyVersion = "spool-unique-1"

// uniqueKey returns the stored key (a hex SHA-256 of the key's parts) and
// state set of a job, or an *InvalidJobError.
func uniqueKey(u *UniqueOpts, kind, queue string, args json.RawMessage, runAt time.Time) (string, backend.UniqueStates, error) {
	states := uniqueStatesDefault
	if u.States != nil {
		states = 0
		for _, s := range u.States {
			if !s.Valid() {
				return "", 0, invalid("unique", nil, "unique state %q is not a job state", s)
			}
			states |= backend.UniqueStatesOf(s)
		}
		if states&backend.UniqueStatesRequired != backend.UniqueStatesRequired {
			return "", 0, invalid("unique", nil, "unique states %v must include available, scheduled, retryable and running: a job passes through them without a new insert, so leaving one out would let two jobs hold one key", u.States)
		}
	}
	if len(u.Key) > UniqueKeyMaxBytes {
		return "", 0, invalid("unique", nil, "unique key of %d bytes, at most %d allowed", len(u.Key), UniqueKeyMaxBytes)
	}
	if u.ByPeriod < 0 {
		return "", 0, invalid("unique", nil, "unique period %s is negative", u.ByPeriod)
	}
	if len(u.ArgsFields) > 0 && !u.ByArgs {
		return "", 0, invalid("unique", nil, "unique ArgsFields are set but ByArgs is not")
	}
	h := sha256.New()
	// Every part is length-prefixed, so that no two different sets of parts
	// hash the same bytes.
	part := func(name string, value []byte) {
		h.Write([]byte(name))
		h.Write([]byte(strconv.Itoa(len(value))))
		h.Write([]byte{':'})
		h.Write(value)
	}
	part(uniqueKeyVersion, nil)
	part("kind", []byte(kind))
	if u.ByQueue {
		part("queue", []byte(queue))
	}
	if u.ByPeriod > 0 {
		slot := runAt.UnixNano() / int64(u.ByPeriod)
		if runAt.UnixNano() < 0 && runAt.UnixNano()%int64(u.ByPeriod) != 0 {
			slot-- // floor, not truncation toward zero
		}
		part("period", []byte(u.ByPeriod.String()+"@"+strconv.FormatInt(slot, 10)))
	}
	if u.Key != "" {
		part("key", []byte(u.Key))
	}
	if u.ByArgs {
		canon, err := canonicalArgs(args, u.ArgsFields)
		if err != nil {
			return "", 0, invalid("unique", nil, "unique by args: %v", err)
		}
		part("args", canon)
	}
	return hex.EncodeToString(h.Sum(nil)), states, nil
}

// canonicalArgs encodes args (or the named top-level fields of them) so that
// equal values give equal bytes whatever their order and spacing: objects
// with sorted keys, numbers as written.
func canonicalArgs(args json.RawMessage, fields []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, errArgsNotObject
		}
		names := slices.Clone(fields)
		slices.Sort(names)
		names = slices.Compact(names)
		picked := make([]any, 0, 2*len(names))
		for _, n := range names {
			picked = append(picked, n, obj[n])
		}
		v = picked
	}
	// encoding/json writes map keys sorted; json.Number keeps the digits.
	return json.Marshal(v)
}

var errArgsNotObject = errors.New("ArgsFields need args that encode to a JSON object")

// insertDebounced writes one debounced job (its row is p.Job) and reports
// it as JobInsertMany would: a duplicate when an insert moved the key's
// pending job instead of making one.
func (c *Client) insertDebounced(ctx context.Context, tx any, p *backend.JobDebounceParams) (*backend.JobInsertManyResult, error) {
	p.Tx = tx
	r, err := c.backend.JobInsertDebounced(ctx, p)
	if err != nil {
		return nil, err // the backend's error names the operation
	}
	res := &backend.JobInsertManyResult{IDs: []int64{r.ID}}
	if r.Debounced {
		res.Duplicates = []bool{true}
		return res, nil
	}
	res.Count = 1
	rows := []*backend.JobInsertParams{p.Job}
	if tx == nil {
		c.engine.WakeInserted(rows)
	}
	c.observers.inserted(rows)
	return res, nil
}
