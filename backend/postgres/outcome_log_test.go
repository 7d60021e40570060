package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// TestOutcomeWriteReplyLostIsLogged: when the reply to a job's outcome
// write is lost after the write committed, the outcome writer's warning
// says the outcomes may have been written (write=outcome_unknown), its
// retry finds the outcome applied, and the job is completed once.
func TestOutcomeWriteReplyLostIsLogged(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	direct := insertClient(t, be)
	id := conformance.InsertNote(t, direct, 1)
	proxy := testdb.NewProxy(t)
	// Claimed in place, the job is completed by complete_keep_small.sql.
	pbe := simpleProxiedBackend(t, be, proxy, postgres.Options{Claims: postgres.ClaimsInPlace})
	logs := conformance.NewLogLines("outcome already applied")
	// The completion's statement is the next to carry this text.
	c := conformance.CompletionReplyLostClient(t, pbe, logs, proxy, "SET state = 'completed', finalized_at = now()")
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.Seen():
	case <-time.After(60 * time.Second):
		t.Fatalf("no retry found the outcome applied within 60 s; the log:\n%s", logs.Text())
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	text := logs.Text()
	if !strings.Contains(text, "WARN spool: job outcomes may or may not have been written") || !strings.Contains(text, "write=outcome_unknown") {
		t.Fatalf("the failed outcome write's warning does not say its outcome is unknown:\n%s", text)
	}
	j, err := be.JobGet(ctx, id)
	if err != nil || j.State != spool.JobStateCompleted || j.Attempt != 1 {
		t.Fatalf("job after the lost reply: %+v %v, want completed at attempt 1", j, err)
	}
}
