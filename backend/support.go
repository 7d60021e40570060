package backend

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one schema migration file of a backend.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads the migrations in dir of fsys (usually an embed.FS),
// in version order. File names are NNN_name.sql; the numbers must run 1, 2,
// 3… without gaps.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration versions have a gap at %d", i+1)
		}
	}
	return out, nil
}

// MustLoadMigrations is LoadMigrations for a backend's embedded files: a
// malformed file is a build defect, so it panics (at start-up, failing every
// test).
func MustLoadMigrations(fsys fs.FS, dir, backendName string) []Migration {
	ms, err := LoadMigrations(fsys, dir)
	if err != nil {
		panic("spool " + backendName + ": embedded migrations: " + err.Error())
	}
	return ms
}

// Unapplied returns the leases of items that are not among the applied
// ones: what a fenced batch write reports as rejected. Leases, not ids, are
// compared: a stale and a live lease on one job may share a batch.
func Unapplied[T any](items []T, applied []LeaseRef, lease func(T) LeaseRef) []LeaseRef {
	if len(applied) == len(items) {
		return nil
	}
	seen := make(map[LeaseRef]struct{}, len(applied))
	for _, l := range applied {
		seen[l] = struct{}{}
	}
	var out []LeaseRef
	for _, it := range items {
		l := lease(it)
		if _, ok := seen[l]; !ok {
			out = append(out, l)
		}
	}
	return out
}

// Rows is the part of *sql.Rows and pgx.Rows that the helpers here read.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CollectDependencies reads rows of (job id, task, state, output), output
// NULL for none, into the dependency outputs a task reads. The caller
// closes rows.
func CollectDependencies(rows Rows) ([]DependencyOutput, error) {
	out := []DependencyOutput{}
	for rows.Next() {
		var (
			d     DependencyOutput
			state string
			o     []byte
		)
		if err := rows.Scan(&d.JobID, &d.Task, &state, &o); err != nil {
			return nil, err
		}
		d.State = State(state)
		if o != nil {
			d.Output = json.RawMessage(o)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// CollectWorkflowSummaries reads rows of (id, name, created, tasks,
// state, count), ordered by workflow, one a workflow and state of its jobs
// (state ” for a workflow without jobs), into one summary a workflow.
// created is scanned into a T, the store's form of a time, which at turns
// into the time. The caller closes rows.
func CollectWorkflowSummaries[T any](rows Rows, at func(T) time.Time) ([]*WorkflowSummary, error) {
	var out []*WorkflowSummary
	for rows.Next() {
		var (
			w       WorkflowSummary
			created T
			state   string
			n       int64
		)
		if err := rows.Scan(&w.ID, &w.Name, &created, &w.Tasks, &state, &n); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].ID != w.ID {
			w.CreatedAt = at(created)
			w.Counts = map[State]int64{}
			out = append(out, &w)
		}
		if state != "" {
			out[len(out)-1].Counts[State(state)] = n
		}
	}
	return out, rows.Err()
}

// CollectQueueStats reads rows of (queue, state, count), ordered by queue,
// into one QueueStats per queue. The caller closes rows.
func CollectQueueStats(rows Rows) ([]QueueStats, error) {
	var out []QueueStats
	for rows.Next() {
		var (
			queue, state string
			n            int64
		)
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, QueueStats{Queue: queue, Counts: map[State]int64{}})
		}
		out[len(out)-1].Counts[State(state)] = n
	}
	return out, rows.Err()
}

// Defaults of the batch and page sizes the interface leaves to the caller.
const (
	DefaultRescueMax  = 1000
	DefaultCleanupMax = 10000
	DefaultListLimit  = 100
)

// MaxOrDefault returns p.Max, or DefaultRescueMax when it is not positive.
func (p *JobRescueParams) MaxOrDefault() int { return orDefault(p.Max, DefaultRescueMax) }

// MaxOrDefault returns p.Max, or DefaultCleanupMax when it is not positive.
func (p *JobCleanupParams) MaxOrDefault() int { return orDefault(p.Max, DefaultCleanupMax) }

// LimitOrDefault returns p.Limit, or DefaultListLimit when it is not positive.
func (p *JobListParams) LimitOrDefault() int { return orDefault(p.Limit, DefaultListLimit) }

// MaxThroughputWindow is the longest window JobThroughput looks back.
const MaxThroughputWindow = 7 * 24 * time.Hour

// Check refuses a window or bucket the backends do not serve.
func (p *JobThroughputParams) Check() error {
	if p.Window <= 0 || p.Window > MaxThroughputWindow {
		return fmt.Errorf("throughput window %s is out of range (0, %s]", p.Window, MaxThroughputWindow)
	}
	if p.Bucket < time.Second || p.Bucket%time.Second != 0 {
		return fmt.Errorf("throughput bucket %s is not a whole number of seconds", p.Bucket)
	}
	return nil
}

// BucketSeconds is p.Bucket in whole seconds.
func (p *JobThroughputParams) BucketSeconds() int64 { return int64(p.Bucket / time.Second) }

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// AnyUnique reports whether any of jobs has a unique key.
func AnyUnique(jobs []*JobInsertParams) bool {
	for _, j := range jobs {
		if j.UniqueKey != "" {
			return true
		}
	}
	return false
}

// DefaultBulkMax is JobBulkParams.Max when zero.
const DefaultBulkMax = 1000

// MaxOrDefault returns p.Max, or DefaultBulkMax when it is not positive.
func (p *JobBulkParams) MaxOrDefault() int {
	if p.Max <= 0 {
		return DefaultBulkMax
	}
	return p.Max
}

// Selects reports whether a batch of p takes j: past AfterID, matching every
// filter, in a state the action applies to.
func (p *JobBulkParams) Selects(j *JobRow) bool {
	return j.ID > p.AfterID && p.takes(j.State) &&
		(p.Queue == "" || j.Queue == p.Queue) && (p.Kind == "" || j.Kind == p.Kind) &&
		(p.CreatedAfter.IsZero() || j.CreatedAt.After(p.CreatedAfter)) &&
		(p.CreatedBefore.IsZero() || j.CreatedAt.Before(p.CreatedBefore))
}

// takes reports whether a batch of p takes jobs in state s: the action
// applies to it and the filter's states, if any, include it.
func (p *JobBulkParams) takes(s State) bool {
	return p.Action.Applies(s) && (len(p.States) == 0 || slices.Contains(p.States, s))
}

// StatesTaken lists the states a batch of p takes jobs in (empty when the
// filter and the action have none in common).
func (p *JobBulkParams) StatesTaken() []State {
	var out []State
	for _, s := range AllStates {
		if p.takes(s) {
			out = append(out, s)
		}
	}
	return out
}

// NeedsKeyBack reports whether retrying j makes it take back a unique key
// it does not hold now (a unique job in a state outside its set).
func NeedsKeyBack(j *JobRow) bool {
	return j.UniqueKey != "" && !j.UniqueStates.Has(j.State)
}

// NullText is a value for a SQL statement's text or JSON parameter: nil
// (SQL NULL) for nil, b as a string otherwise.
func NullText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// FlowUses collects a queue's flow use, by key, from what a store reads.
type FlowUses map[string]*FlowKeyUse

func (u FlowUses) key(k string) *FlowKeyUse {
	x, ok := u[k]
	if !ok {
		x = &FlowKeyUse{Key: k}
		u[k] = x
	}
	return x
}

// Add counts running and pending jobs of key k.
func (u FlowUses) Add(k string, running, pending int) {
	x := u.key(k)
	x.Running += running
	x.Pending += pending
}

// SetRate records key k's rate state.
func (u FlowUses) SetRate(k string, tat time.Time) {
	u.key(k).RateTAT = &tat
}

// Sorted returns the keys busiest first (running, then pending, then key),
// at most limit of them (0: DefaultListLimit).
func (u FlowUses) Sorted(limit int) []FlowKeyUse {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	out := make([]FlowKeyUse, 0, len(u))
	for _, x := range u {
		out = append(out, *x)
	}
	slices.SortFunc(out, func(a, b FlowKeyUse) int {
		return cmp.Or(cmp.Compare(b.Running, a.Running), cmp.Compare(b.Pending, a.Pending), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(len(out), limit)]
}

// ClaimOrder orders jobs as claims take them: priority, run time, id.
func ClaimOrder(a, b *JobRow) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
}

// Throughput counts finished jobs by bucket (its start, in Unix seconds),
// for stores that count them in Go rather than in a query.
type Throughput map[int64]*ThroughputBucket

// Add counts a job that finished in state s at t, in the bucket of width
// seconds that holds t.
func (b Throughput) Add(t time.Time, s State, width int64) {
	start := t.Unix() / width * width
	bk := b[start]
	if bk == nil {
		bk = &ThroughputBucket{Start: time.Unix(start, 0).UTC()}
		b[start] = bk
	}
	switch s {
	case StateCompleted:
		bk.Completed++
	case StateDiscarded:
		bk.Discarded++
	case StateCancelled:
		bk.Cancelled++
	}
}

// Sorted returns the buckets in time order.
func (b Throughput) Sorted() []ThroughputBucket {
	out := make([]ThroughputBucket, 0, len(b))
	for _, bk := range b {
		out = append(out, *bk)
	}
	slices.SortFunc(out, func(x, y ThroughputBucket) int { return x.Start.Compare(y.Start) })
	return out
}

// QueueCounts counts jobs by queue and state, for stores that count them
// in Go rather than in a query.
type QueueCounts map[string]map[State]int64

// Add counts n jobs of queue in state s.
func (c QueueCounts) Add(queue string, s State, n int64) {
	if c[queue] == nil {
		c[queue] = map[State]int64{}
	}
	c[queue][s] += n
}

// Sorted returns the counts in queue order.
func (c QueueCounts) Sorted() []QueueStats {
	out := make([]QueueStats, 0, len(c))
	for q, counts := range c {
		out = append(out, QueueStats{Queue: q, Counts: counts})
	}
	slices.SortFunc(out, func(x, y QueueStats) int { return cmp.Compare(x.Queue, y.Queue) })
	return out
}

// CarriesSteps reports whether a finish of fs carries step records
// (JobFinish.Steps).
func CarriesSteps(fs []JobFinish) bool {
	for i := range fs {
		if len(fs[i].Steps) > 0 {
			return true
		}
	}
	return false
}

// CarriedSteps returns the step records the finishes of fs carry, in
// order: those of the finishes keep accepts, or all when keep is nil.
func CarriedSteps(fs []JobFinish, keep func(*JobFinish) bool) []StepRecordParams {
	n := 0
	for i := range fs {
		n += len(fs[i].Steps)
	}
	if n == 0 {
		return nil
	}
	out := make([]StepRecordParams, 0, n)
	for i := range fs {
		if f := &fs[i]; len(f.Steps) > 0 && (keep == nil || keep(f)) {
			out = append(out, f.Steps...)
		}
	}
	return out
}
