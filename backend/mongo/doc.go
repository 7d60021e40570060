package mongo

import (
	"encoding/json"
	"time"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/spoolq/spool/backend"
)

// jobDoc is a job as stored. Times are microseconds since the Unix epoch
// (int64), the precision of the SQL stores, which BSON dates (milliseconds)
// lack; fin is the finish time as a BSON date as well, for the optional
// TTL index. ukey is the unique key while the job holds it (its state is
// in ustates) and absent otherwise: the unique partial index covers only
// documents that have it.
type jobDoc struct {
	ID          int64      `bson:"_id"`
	Queue       string     `bson:"queue"`
	Kind        string     `bson:"kind"`
	Args        string     `bson:"args"`
	State       string     `bson:"state"`
	Priority    int32      `bson:"priority"`
	RunAt       int64      `bson:"run_at"`
	Attempt     int32      `bson:"attempt"`
	MaxAttempts int32      `bson:"max_attempts"`
	Fence       int32      `bson:"fence"`
	LeasedUntil *int64     `bson:"leased_until,omitempty"`
	LeasedBy    string     `bson:"leased_by,omitempty"`
	CreatedAt   int64      `bson:"created_at"`
	AttemptedAt *int64     `bson:"attempted_at,omitempty"`
	FinalizedAt *int64     `bson:"finalized_at,omitempty"`
	Fin         *time.Time `bson:"fin,omitempty"`
	Errors      []errDoc   `bson:"errors,omitempty"`
	Tags        []string   `bson:"tags"`
	Metadata    string     `bson:"metadata"`
	UniqueKey   string     `bson:"unique_key,omitempty"`
	UKey        string     `bson:"ukey,omitempty"`
	UStates     int32      `bson:"ustates,omitempty"`
	Output      *string    `bson:"output,omitempty"`
	FlowKey     string     `bson:"flow_key,omitempty"`
	// DoneFence is the fence of the claim whose outcome was written last.
	DoneFence int32 `bson:"done_fence,omitempty"`
}

// errDoc is one entry of a job's error history.
type errDoc struct {
	Attempt int32  `bson:"attempt"`
	At      int64  `bson:"at"`
	Error   string `bson:"error"`
	Trace   string `bson:"trace,omitempty"`
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func fromMicrosPtr(us *int64) *time.Time {
	if us == nil {
		return nil
	}
	t := fromMicros(*us)
	return &t
}

// row converts a stored job to the backend's form.
func (d *jobDoc) row() *backend.JobRow {
	r := &backend.JobRow{
		ID: d.ID, Queue: d.Queue, Kind: d.Kind, Args: json.RawMessage(d.Args),
		State: backend.State(d.State), Priority: int16(d.Priority), RunAt: fromMicros(d.RunAt),
		Attempt: int16(d.Attempt), MaxAttempts: int16(d.MaxAttempts), Fence: d.Fence,
		LeasedUntil: fromMicrosPtr(d.LeasedUntil), LeasedBy: d.LeasedBy,
		CreatedAt: fromMicros(d.CreatedAt), AttemptedAt: fromMicrosPtr(d.AttemptedAt),
		FinalizedAt: fromMicrosPtr(d.FinalizedAt), Tags: d.Tags, Metadata: json.RawMessage(d.Metadata),
		UniqueKey: d.UniqueKey, UniqueStates: backend.UniqueStates(d.UStates), FlowKey: d.FlowKey,
	}
	if r.Tags == nil {
		r.Tags = []string{}
	}
	if d.Output != nil {
		r.Output = json.RawMessage(*d.Output)
	}
	for _, e := range d.Errors {
		r.Errors = append(r.Errors, backend.AttemptError{Attempt: int(e.Attempt), At: fromMicros(e.At), Error: e.Error, Trace: e.Trace})
	}
	return r
}

// newDoc builds the document of an insert at the server's time t.
func newDoc(id int64, p *backend.JobInsertParams, t time.Time) *jobDoc {
	runAt := t.Add(p.Delay)
	if p.RunAt != nil {
		runAt = p.RunAt.UTC()
	}
	state := backend.StateAvailable
	if runAt.After(t) {
		state = backend.StateScheduled
	}
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	meta := string(p.Metadata)
	if meta == "" {
		meta = "{}"
	}
	d := &jobDoc{
		ID: id, Queue: p.Queue, Kind: p.Kind, Args: string(p.Args), State: string(state),
		Priority: int32(p.Priority), RunAt: micros(runAt), MaxAttempts: int32(p.MaxAttempts),
		CreatedAt: micros(t), Tags: tags, Metadata: meta, UniqueKey: p.UniqueKey,
		UStates: int32(p.UniqueStates), FlowKey: p.FlowKey,
	}
	if p.UniqueKey != "" {
		d.UKey = p.UniqueKey // a new job is pending: every set holds its key then
	}
	return d
}

// change is one transition of a job computed in Go from the document read
// (set and unset fields), written by a conditional update whose filter
// says the document is still as read where it matters.
type change struct {
	set   bson.M
	unset bson.M
	push  *errDoc
}

func newChange() *change { return &change{set: bson.M{}, unset: bson.M{}} }

// state moves the job to s at t, keeping its unique key where its set
// says so and stamping its finish when s is final.
func (c *change) state(d *jobDoc, s backend.State, t time.Time) {
	c.set["state"] = string(s)
	if d.UniqueKey != "" {
		if backend.UniqueStates(d.UStates).Has(s) {
			c.set["ukey"] = d.UniqueKey
		} else {
			c.unset["ukey"] = ""
		}
	}
	if s.IsFinal() {
		c.set["finalized_at"] = micros(t)
		c.set["fin"] = t
	} else {
		c.unset["finalized_at"] = ""
		c.unset["fin"] = ""
	}
	if s != backend.StateRunning {
		c.unset["leased_until"] = ""
		c.unset["leased_by"] = ""
	}
}

// update is the change as an update document.
func (c *change) update() bson.M {
	u := bson.M{"$set": c.set}
	if len(c.unset) > 0 {
		for k := range c.unset {
			delete(c.set, k)
		}
		u["$unset"] = c.unset
	}
	if c.push != nil {
		u["$push"] = bson.M{"errors": c.push}
	}
	return u
}

// finish computes one outcome of the running job d at t (the memory
// backend's rules); delete reports that the job is to be deleted instead.
func finish(d *jobDoc, f backend.JobFinish, deleteCompleted bool, t time.Time) (c *change, del bool) {
	c = newChange()
	if f.Error != nil {
		c.push = &errDoc{Attempt: int32(f.Error.Attempt), At: micros(t), Error: f.Error.Error, Trace: f.Error.Trace}
	}
	switch f.Outcome {
	case backend.OutcomeComplete:
		if deleteCompleted {
			return nil, true
		}
		c.state(d, backend.StateCompleted, t)
	case backend.OutcomeRetry:
		if d.Attempt >= d.MaxAttempts {
			c.state(d, backend.StateDiscarded, t)
			break
		}
		c.state(d, backend.StateRetryable, t)
		c.set["run_at"] = micros(t.Add(f.Delay))
	case backend.OutcomeSnooze:
		s := backend.StateAvailable
		if f.Delay > 0 {
			s = backend.StateScheduled
		}
		c.state(d, s, t)
		c.set["attempt"] = d.Attempt - 1
		c.set["run_at"] = micros(t.Add(f.Delay))
	case backend.OutcomeCancel:
		c.state(d, backend.StateCancelled, t)
	case backend.OutcomeDiscard:
		c.state(d, backend.StateDiscarded, t)
	default: // OutcomeRelease
		c.state(d, backend.StateAvailable, t)
		c.set["attempt"] = d.Attempt - 1
	}
	return c, false
}

func pendingStates() bson.A {
	return bson.A{string(backend.StateAvailable), string(backend.StateScheduled), string(backend.StateRetryable)}
}
