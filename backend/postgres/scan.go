package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/backend"
)

// jobScanner reads rows of the column list sql/fragments/cols.sql into JobRows with a few allocations
// per batch instead of about ten per row: rows come from chunks of up to
// rowChunk, their JSON from shared byte chunks, and the texts every row
// repeats (queue, kind, state, the lease holder) are interned.
//
// Scanning each column into a field of a new JobRow (pointers for the
// nullable times, a copy per JSON column, a new string per text) put
// scanJob at 20% of the client's CPU in a drain (--cpuprofile), beside 22%
// in the allocator and 11% in the garbage collector.
//
// A JobRow shares its chunk with the others of its batch, which the
// garbage collector frees once no row of the chunk is referenced: a chunk
// is small, so a long-running job keeps little besides its own row alive.
type jobScanner struct {
	boxes []jobBox // the current chunk's rows not yet handed out
	bytes []byte   // the current byte chunk's free space
	// nextRows and nextBytes size the next chunks: they start small and
	// double up to rowChunk and byteChunk, so that a claim of one job (a
	// steady queue's usual claim) allocates about what it reads.
	nextRows, nextBytes int
	// texts are the distinct texts read so far, at most maxTexts: a batch
	// repeats a few (its queue, kinds, state, lease holder), which a look
	// through a short list finds without allocating.
	texts []string

	// cur is the row being scanned; dest points into it and at the column
	// readers below, all inside the scanner, so that a scanner is one
	// allocation and every row's Scan reuses the same destinations.
	cur                                   backend.JobRow
	state                                 string
	leasedUntil, attemptedAt, finalizedAt pgtype.Timestamptz
	uniqueStates                          int16
	queue, kind, stateText, leasedBy      internText
	uniqueKey, flowKey, waitKind, task    internText
	args, metadata, output                chunkBytes
	errors                                attemptErrors
	dest                                  [28]any
}

// jobBox is a JobRow with room for the times it points to.
type jobBox struct {
	row                                   backend.JobRow
	leasedUntil, attemptedAt, finalizedAt time.Time
}

const (
	// rowChunk is the most rows one allocation holds.
	rowChunk = 64
	// byteChunk is the largest byte chunk; values over a quarter of it get
	// their own.
	byteChunk = 8 << 10
	// maxTexts bounds the texts a scanner keeps to reuse.
	maxTexts = 16
)

func newJobScanner() *jobScanner {
	s := &jobScanner{nextRows: 1, nextBytes: 256}
	c := &s.cur
	s.queue, s.kind, s.stateText = internText{s, &c.Queue}, internText{s, &c.Kind}, internText{s, &s.state}
	s.leasedBy, s.uniqueKey, s.flowKey = internText{s, &c.LeasedBy}, internText{s, &c.UniqueKey}, internText{s, &c.FlowKey}
	s.args, s.metadata, s.output = chunkBytes{s, &c.Args}, chunkBytes{s, &c.Metadata}, chunkBytes{s, &c.Output}
	s.errors = attemptErrors{s}
	s.waitKind, s.task = internText{s, &c.WaitKind}, internText{s, &c.WorkflowTask}
	s.dest = [28]any{&c.ID, &s.queue, &s.kind, &s.args,
		&s.stateText, &c.Priority, &c.RunAt, &c.Attempt, &c.MaxAttempts, &c.Fence,
		&s.leasedUntil, &s.leasedBy, &c.CreatedAt, &s.attemptedAt, &s.finalizedAt,
		&s.errors, &c.Tags, &s.metadata,
		&s.uniqueKey, &s.uniqueStates, &s.output, &s.flowKey,
		&s.waitKind, &c.DepsLeft, &c.HasDependents, &c.WorkflowID, &s.task, &c.BatchID}
	return s
}

// scan reads one row.
func (s *jobScanner) scan(row pgx.Row) (*backend.JobRow, error) {
	s.cur = backend.JobRow{}
	if err := row.Scan(s.dest[:]...); err != nil {
		return nil, err
	}
	if len(s.boxes) == 0 {
		s.boxes = make([]jobBox, s.nextRows)
		s.nextRows = min(2*s.nextRows, rowChunk)
	}
	b := &s.boxes[0]
	s.boxes = s.boxes[1:]
	b.row = s.cur
	j := &b.row
	j.State = backend.State(s.state)
	j.UniqueStates = backend.UniqueStates(s.uniqueStates)
	if s.leasedUntil.Valid {
		b.leasedUntil = s.leasedUntil.Time
		j.LeasedUntil = &b.leasedUntil
	}
	if s.attemptedAt.Valid {
		b.attemptedAt = s.attemptedAt.Time
		j.AttemptedAt = &b.attemptedAt
	}
	if s.finalizedAt.Valid {
		b.finalizedAt = s.finalizedAt.Time
		j.FinalizedAt = &b.finalizedAt
	}
	return j, nil
}

// internText scans a text into *dst, reusing the string of an equal text
// scanned before (NULL reads as "").
type internText struct {
	s   *jobScanner
	dst *string
}

// ScanBytes implements pgtype.BytesScanner.
func (t *internText) ScanBytes(v []byte) error {
	if len(v) == 0 {
		*t.dst = ""
		return nil
	}
	for _, str := range t.s.texts {
		if str == string(v) {
			*t.dst = str
			return nil
		}
	}
	str := string(v)
	if len(t.s.texts) < maxTexts {
		t.s.texts = append(t.s.texts, str)
	}
	*t.dst = str
	return nil
}

// chunkBytes copies a JSON value into the scanner's byte chunk (NULL
// reads as nil).
type chunkBytes struct {
	s   *jobScanner
	dst *json.RawMessage
}

// ScanBytes implements pgtype.BytesScanner.
func (c *chunkBytes) ScanBytes(v []byte) error {
	if v == nil {
		*c.dst = nil
		return nil
	}
	n := len(v)
	if n > byteChunk/4 {
		*c.dst = append(json.RawMessage(nil), v...)
		return nil
	}
	if len(c.s.bytes) < n {
		size := max(c.s.nextBytes, n)
		c.s.bytes = make([]byte, size)
		c.s.nextBytes = min(2*size, byteChunk)
	}
	// The capacity is cut to the value, so that an append to one job's
	// JSON never writes over the next one's.
	*c.dst = json.RawMessage(c.s.bytes[:n:n])
	copy(*c.dst, v)
	c.s.bytes = c.s.bytes[n:]
	return nil
}

// attemptErrors decodes the error history of the row being scanned (NULL
// or empty: none).
type attemptErrors struct{ s *jobScanner }

// ScanBytes implements pgtype.BytesScanner.
func (a *attemptErrors) ScanBytes(v []byte) error {
	if len(v) == 0 {
		return nil
	}
	if err := json.Unmarshal(v, &a.s.cur.Errors); err != nil {
		return fmt.Errorf("decode error history of job %d: %w", a.s.cur.ID, err)
	}
	return nil
}

// scanJob reads one row of the column list sql/fragments/cols.sql.
func scanJob(row pgx.Row) (*backend.JobRow, error) {
	return newJobScanner().scan(row)
}

func collectJobs(rows pgx.Rows) ([]*backend.JobRow, error) {
	defer rows.Close()
	var (
		out []*backend.JobRow
		s   *jobScanner
	)
	for rows.Next() {
		if s == nil {
			s = newJobScanner()
		}
		j, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// collectLeases reads (id, fence) rows into one destination.
func collectLeases(rows pgx.Rows) ([]backend.LeaseRef, error) {
	defer rows.Close()
	var (
		out  []backend.LeaseRef
		l    backend.LeaseRef
		dest = []any{&l.ID, &l.Fence}
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
