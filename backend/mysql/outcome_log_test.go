package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
)

// TestCompletionReplyLostIsLogged: a plain completion is one autocommit
// statement (completeFast), so when its reply is lost the outcome writer's
// warning says it may have been written (write=outcome_unknown), and its
// retry finds the job completed under the lease: the outcome applied, not
// a lost lease, and the job completed once.
func TestCompletionReplyLostIsLogged(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	id := conformance.InsertNote(t, insertOnlyClient(t, direct), 1)
	logs := conformance.NewLogLines("")
	// The completion's UPDATE is the next statement with this text; its
	// reply is lost after the server has committed it.
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
	if !strings.Contains(text, "WARN spool: job outcomes may or may not have been written") || !strings.Contains(text, "write=outcome_unknown") {
		t.Fatalf("the failed outcome write's warning does not say it may have been written:\n%s", text)
	}
	if strings.Contains(text, "already applied or lease lost") || strings.Contains(text, "lease no longer holds") {
		t.Fatalf("the retry reported the applied completion as a rejected lease:\n%s", text)
	}
	j, err := direct.JobGet(ctx, id)
	if err != nil || j.State != spool.JobStateCompleted || j.Attempt != 1 {
		t.Fatalf("job after the cut: %+v %v, want completed at attempt 1", j, err)
	}
}
