package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
)

// TestOutcomeWriteCutBeforeCommitIsLogged: when the connection of a job's
// outcome write fails before its transaction's COMMIT, the outcome
// writer's warning says the outcomes were not written
// (write=not_written), and its retry completes the job, once.
func TestOutcomeWriteCutBeforeCommitIsLogged(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	id := conformance.InsertNote(t, insertOnlyClient(t, direct), 1)
	logs := conformance.NewLogLines("")
	// The completion's UPDATE is the next statement with this text; its
	// reply is lost, and the server rolls its transaction back.
	c := conformance.CompletionReplyLostClient(t, proxied, logs, proxy, "SET state = 'completed', finalized_at = UTC_TIMESTAMP(6)")
	done, stop := c.Subscribe(spool.EventJobCompleted)
	defer stop()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-done:
		if ev.JobID != id {
			t.Fatalf("completed job %d, want %d", ev.JobID, id)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the job was not completed within 60 s; the log:\n%s", logs.Text())
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	text := logs.Text()
	if !strings.Contains(text, "WARN spool: job outcomes not written") || !strings.Contains(text, "write=not_written") {
		t.Fatalf("the failed outcome write's warning does not say it was not written:\n%s", text)
	}
	if strings.Contains(text, "already applied") {
		t.Fatalf("the retry found the outcome applied, though its first try was cut before COMMIT:\n%s", text)
	}
	j, err := direct.JobGet(ctx, id)
	if err != nil || j.State != spool.JobStateCompleted || j.Attempt != 1 {
		t.Fatalf("job after the cut: %+v %v, want completed at attempt 1", j, err)
	}
}
