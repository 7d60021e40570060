package sqlite_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
)

// TestClaimReturnsStoredColumns claims plain jobs beside jobs whose
// columns that are NULL or at their defaults for a plain job hold
// something (tags, metadata, an error history, unique and flow keys in
// bytes that are not UTF-8, an output, a workflow, a batch, dependents, a
// finished time), each alone and all together, and checks that each
// claimed row is the row JobGet reads once claimed.
func TestClaimReturnsStoredColumns(t *testing.T) {
	be := newBackend(t, nil)
	ctx := context.Background()
	const n = 80
	ins := make([]*backend.JobInsertParams, n)
	for i := range ins {
		ins[i] = &backend.JobInsertParams{Queue: "default", Kind: "k" + string(rune('a'+i%3)), Args: json.RawMessage(`{"i":` + string(rune('0'+i%10)) + `}`), MaxAttempts: 5}
		if i%4 == 1 {
			ins[i].Tags = []string{"t1", "t2"}
		}
		if i%4 == 2 {
			ins[i].Metadata = json.RawMessage(`{"m":"v"}`)
		}
	}
	res, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins})
	if err != nil {
		t.Fatal(err)
	}
	extra := map[int64]bool{}
	for i, id := range res.IDs {
		if i%5 != 3 {
			continue
		}
		extra[id] = true
		// Every column the claim leaves out for a plain job, set at once,
		// and each alone (by i), as no API writes them all together.
		set := []string{
			`errors = '[{"attempt":1,"error":"boom","at":"2026-11-30T00:00:00Z"}]'`,
			`unique_key = CAST(X'ff00fe' AS TEXT) || id, unique_states = 15`,
			`output = '{"o":1}'`,
			`flow_key = CAST(X'c3' AS TEXT)`,
			`has_dependents = 1`,
			`workflow_id = 7, workflow_task = 'task'`,
			`batch_id = 9`,
			`finalized_at = 1`,
		}
		q := `UPDATE spool_jobs SET ` + set[0]
		if k := i / 5; k < len(set) {
			q = `UPDATE spool_jobs SET ` + set[k]
		} else {
			for _, s := range set[1:] {
				q += ", " + s
			}
		}
		if _, err := be.DB().ExecContext(ctx, q+` WHERE id = ?`, id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if len(extra) == 0 {
		t.Fatal("no job with extra columns")
	}
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: n, Lease: time.Minute, ClaimID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("claimed %d jobs, want %d", len(rows), n)
	}
	seen := 0
	for _, got := range rows {
		want, err := be.JobGet(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("job %d (extra columns %v):\nclaimed %+v\nstored  %+v", got.ID, extra[got.ID], *got, *want)
		}
		if extra[got.ID] {
			seen++
		}
	}
	if seen != len(extra) {
		t.Fatalf("claimed %d of the %d jobs with extra columns", seen, len(extra))
	}
}

// A claim's rows are allocated in blocks that double, up to 1,024, and
// that together hold exactly the rows of a claim that takes all it asked
// for: no row is allocated that the claim could not read.
func TestClaimBlocks(t *testing.T) {
	for _, limit := range []int{1, 15, 16, 17, 100, 1500, 2000, 3000, 5000} {
		var sizes []int
		for read := 0; read < limit; {
			n := sqlite.ClaimBlock(read, limit)
			if n < 1 || n > 1024 || read > 0 && n > read {
				t.Fatalf("limit %d: a block of %d after %d rows read", limit, n, read)
			}
			sizes = append(sizes, n)
			read += n
			if read > limit {
				t.Fatalf("limit %d: blocks %v hold %d rows", limit, sizes, read)
			}
		}
		if limit >= 16 && sizes[0] != 16 {
			t.Fatalf("limit %d: first block %d, want 16", limit, sizes[0])
		}
	}
	// A claim whose limit is not known grows as before.
	if n := sqlite.ClaimBlock(3000, 0); n != 1024 {
		t.Fatalf("unknown limit, 3,000 read: block %d, want 1024", n)
	}
}
