package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// logLines is a slog.Handler keeping every line's text, and telling when
// a line holding want arrives.
type logLines struct {
	mu    sync.Mutex
	lines []string
	want  string
	seen  chan struct{}
	once  sync.Once
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	line := b.String()
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	if strings.Contains(line, l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestOutcomeWriteReplyLostIsLogged: when the reply to a job's outcome
// write is lost after the write committed, the outcome writer's warning
// says the outcomes may have been written (write=outcome_unknown), its
// retry finds the outcome applied, and the job is completed once.
func TestOutcomeWriteReplyLostIsLogged(t *testing.T) {
	t.Parallel()
	be := newBackend(t)
	direct := insertClient(t, be)
	id := insertNote(t, direct, 1)
	proxy := testdb.NewProxy(t)
	// Claimed in place, the job is completed by complete_keep_small.sql.
	pbe := simpleProxiedBackend(t, be, proxy, postgres.Options{Claims: postgres.ClaimsInPlace})
	logs := &logLines{want: "outcome already applied", seen: make(chan struct{})}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[conformance.NoteArgs]) error {
		// The completion's statement is the next to carry this text.
		proxy.DropReplyTo("SET state = 'completed', finalized_at = now()")
		return nil
	}))
	c, err := spool.NewClient(pbe, &spool.Config{Workers: ws, Logger: slog.New(logs),
		Queues: map[string]spool.QueueConfig{"default": {MaxWorkers: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.seen:
	case <-time.After(60 * time.Second):
		t.Fatalf("no retry found the outcome applied within 60 s; the log:\n%s", logs.text())
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	text := logs.text()
	if !strings.Contains(text, "WARN spool: job outcomes may or may not have been written") || !strings.Contains(text, "write=outcome_unknown") {
		t.Fatalf("the failed outcome write's warning does not say its outcome is unknown:\n%s", text)
	}
	j, err := be.JobGet(ctx, id)
	if err != nil || j.State != spool.JobStateCompleted || j.Attempt != 1 {
		t.Fatalf("job after the lost reply: %+v %v, want completed at attempt 1", j, err)
	}
}
