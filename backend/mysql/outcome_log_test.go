package mysql_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/conformance"
)

// logLines is a slog.Handler keeping every line's text.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestOutcomeWriteCutBeforeCommitIsLogged: when the connection of a job's
// outcome write fails before its transaction's COMMIT, the outcome
// writer's warning says the outcomes were not written
// (write=not_written), and its retry completes the job, once.
func TestOutcomeWriteCutBeforeCommitIsLogged(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := proxiedMySQL(t)
	id := insertNote(t, insertOnlyClient(t, direct), 1)
	logs := &logLines{}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[conformance.NoteArgs]) error {
		// The completion's UPDATE is the next statement with this text; its
		// reply is lost, and the server rolls its transaction back.
		proxy.DropReplyTo("SET state = 'completed', finalized_at = UTC_TIMESTAMP(6)")
		return nil
	}))
	c, err := spool.NewClient(proxied, &spool.Config{Workers: ws, Logger: slog.New(logs),
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
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
		t.Fatalf("the job was not completed within 60 s; the log:\n%s", logs.text())
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	text := logs.text()
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
