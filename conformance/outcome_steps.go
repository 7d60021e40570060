package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// Step records written with outcomes, by stores that declare
// backend.OutcomeStepWriter (docs/durable.md, "Records written behind").
func outcomeStepTests() []namedTest {
	return []namedTest{
		{"OutcomesWriteTheirSteps", testOutcomesWriteTheirSteps},
	}
}

// testOutcomesWriteTheirSteps: the step records outcomes carry
// (backend.OutcomeStepWriter) are written, in order and under their
// fence, for the outcomes that apply, a completion's or a retry's, a name
// carried twice once; an outcome refused writes none; a job deleted at
// its completion keeps none. Both in a batch with a stale lease and in
// one of completions whose leases all hold, which a store may write by a
// shorter way (MySQL's one UPDATE).
func testOutcomesWriteTheirSteps(t *testing.T, h Harness) {
	for _, c := range []struct{ del, allHold bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		del := c.del
		be := h.NewBackend(t)
		if w, ok := be.(backend.OutcomeStepWriter); !ok || !w.WritesOutcomeSteps() {
			t.Skipf("backend %s writes a run's step records before its outcome, never with it (no backend.OutcomeStepWriter)", be.Name())
		}
		ctx := context.Background()
		jobs := make([]*backend.JobInsertParams, 3)
		for i := range jobs {
			jobs[i] = &backend.JobInsertParams{Queue: "default", Kind: "note", Args: json.RawMessage(`{}`), MaxAttempts: 5}
		}
		if _, err := be.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", Max: 3, Lease: time.Minute, ClaimID: "t"})
		if err != nil || len(rows) != 3 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		with := func(l backend.LeaseRef, o backend.Outcome, names ...string) backend.JobFinish {
			f := backend.JobFinish{Lease: l, Outcome: o, Durable: true}
			if o == backend.OutcomeRetry {
				f.Error = &backend.AttemptError{Attempt: 1, Error: "again"}
			}
			for _, n := range names {
				r, _ := json.Marshal(n)
				f.Steps = append(f.Steps, backend.StepRecordParams{Lease: l, Name: n, Result: r})
			}
			return f
		}
		slices.SortFunc(rows, func(a, b *backend.JobRow) int { return int(a.ID - b.ID) })
		stale := rows[1].Lease()
		stale.Fence++
		finishes := []backend.JobFinish{
			with(rows[0].Lease(), backend.OutcomeComplete, "a", "b", "c", "a"),
			with(stale, backend.OutcomeComplete, "stale"),
			with(rows[2].Lease(), backend.OutcomeRetry, "r1", "r2"),
		}
		if c.allHold {
			// The second job gets no outcome; the third completes.
			finishes = []backend.JobFinish{finishes[0], with(rows[2].Lease(), backend.OutcomeComplete, "r1", "r2")}
		}
		res, err := be.JobFinishMany(ctx, &backend.JobFinishManyParams{DeleteCompleted: del, Finishes: finishes})
		if err == nil && c.allHold && len(res.Rejected) != 0 {
			err = errors.New("a lease that holds refused")
		}
		if err != nil || (!c.allHold && (len(res.Rejected) != 1 || res.Rejected[0] != stale)) {
			t.Fatalf("all leases hold %v: finish: %+v, %v, want only a stale lease refused", c.allHold, res, err)
		}
		names := func(r *backend.JobRow) []string {
			d, err := be.JobDurable(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, s := range d.Steps {
				var v string
				if err := json.Unmarshal(s.Result, &v); err != nil || v != s.Name || s.Fence != r.Fence {
					t.Fatalf("job %d: step %q recorded %s under fence %d", r.ID, s.Name, s.Result, s.Fence)
				}
				out = append(out, s.Name)
			}
			return out
		}
		want := []string{"a", "b", "c"}
		if del {
			want = nil
			if _, err := be.JobGet(ctx, rows[0].ID); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("job deleted at its completion: get %v", err)
			}
		}
		if got := names(rows[0]); !slices.Equal(got, want) {
			t.Fatalf("delete %v, all leases hold %v: job completed: steps %v, want %v", del, c.allHold, got, want)
		}
		if got := names(rows[1]); len(got) != 0 {
			t.Fatalf("job whose outcome was refused or not given: steps %v, want none", got)
		}
		want = []string{"r1", "r2"}
		if c.allHold && del {
			want = nil // completed and deleted
		}
		if got := names(rows[2]); !slices.Equal(got, want) {
			t.Fatalf("delete %v, all leases hold %v: third job: steps %v, want %v", del, c.allHold, got, want)
		}
	}
}
