package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// TestClaimedRowsScannedApart: rows scanned in one batch share chunks, yet
// each is its own: appending to one job's JSON leaves the next one's as it
// was, a job's lease times are its own, a NULL reads as nil, JSON too
// large for a shared chunk and more rows than one chunk holds read whole.
func TestClaimedRowsScannedApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t)
	const n = 150 // more than one chunk of rows
	jobs := make([]*backend.JobInsertParams, n)
	for i := range jobs {
		args := fmt.Sprintf(`{"i": %d}`, i)
		if i == 7 {
			args = fmt.Sprintf(`{"i": 7, "pad": %q}`, strings.Repeat("x", 5000)) // beyond a shared chunk's share
		}
		jobs[i] = &backend.JobInsertParams{Queue: "scan", Kind: fmt.Sprintf("k%d", i%3), Args: json.RawMessage(args), MaxAttempts: 5, Priority: int16(i % 2)}
		if i%2 == 0 {
			jobs[i].Metadata = json.RawMessage(fmt.Sprintf(`{"m": %d}`, i))
		}
	}
	insertJobs(t, be, jobs...)
	rows, err := be.JobClaim(ctx, &backend.JobClaimParams{Queue: "scan", Max: n, Lease: time.Minute, ClaimID: "c#1"})
	if err != nil || len(rows) != n {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		r.Args = append(r.Args, "tail"...)
		*r.LeasedUntil = r.LeasedUntil.Add(time.Hour)
	}
	for _, r := range rows {
		var a struct {
			I   int    `json:"i"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(r.Args[:len(r.Args)-len("tail")], &a); err != nil {
			t.Fatalf("job %d: args %q: %v", r.ID, r.Args, err)
		}
		i := a.I
		if want := fmt.Sprintf("k%d", i%3); r.Kind != want || r.Queue != "scan" || r.State != backend.StateRunning {
			t.Fatalf("job %d: kind %q queue %q state %q", r.ID, r.Kind, r.Queue, r.State)
		}
		if i == 7 && len(a.Pad) != 5000 {
			t.Fatalf("the large args read %d bytes of padding", len(a.Pad))
		}
		if i%2 == 0 {
			if want := fmt.Sprintf(`{"m": %d}`, i); string(r.Metadata) != want {
				t.Fatalf("job %d: metadata %q, want %q", i, r.Metadata, want)
			}
		}
		if r.Output != nil || r.FinalizedAt != nil || r.Errors != nil {
			t.Fatalf("job %d: NULL columns read as %q, %v, %v", i, r.Output, r.FinalizedAt, r.Errors)
		}
		if until := time.Until(*r.LeasedUntil); until < 50*time.Minute {
			t.Fatalf("job %d: its lease end moved with another job's (%s left)", i, until)
		}
		if r.AttemptedAt == nil || r.AttemptedAt == r.LeasedUntil {
			t.Fatalf("job %d: attempted_at %v shares the lease end's time", i, r.AttemptedAt)
		}
	}
}
