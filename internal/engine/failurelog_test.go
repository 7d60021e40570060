package engine

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/backend"
)

// countingHandler keeps, for each record, its level and its
// not_logged_before_this count (0 when absent).
type countingHandler struct {
	mu    sync.Mutex
	lines []droppedLine
}

type droppedLine struct {
	level   slog.Level
	dropped int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	line := droppedLine{level: r.Level}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "not_logged_before_this" {
			line.dropped = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestFailureLogCountsDrops: with a clock the test moves, a flood logs the
// burst, refuses the rest until a token refills, and the next line logged
// carries exactly the number refused since the previous line; across any
// sequence of failures and clock steps, every failure is either a line of
// its own or counted by exactly one later line of its level, and the two
// levels count apart.
func TestFailureLogCountsDrops(t *testing.T) {
	h := &countingHandler{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	f := &failureLog{logger: slog.New(h), now: func() time.Time { return now }}
	failed := &backend.JobFinish{Outcome: backend.OutcomeRetry, Error: &backend.AttemptError{Error: "smtp refused"}}
	discarded := &backend.JobFinish{Outcome: backend.OutcomeDiscard}
	row := &backend.JobRow{ID: 1, Kind: "k", Queue: "q", Attempt: 1, MaxAttempts: 5}

	for range 300 {
		f.record(row, failed, time.Millisecond)
	}
	if len(h.lines) != failureLogBurst {
		t.Fatalf("a flood of 300 at one instant logged %d lines, want the burst %d", len(h.lines), failureLogBurst)
	}
	for i, l := range h.lines {
		if l.dropped != 0 {
			t.Fatalf("line %d of the burst says %d dropped, want none", i, l.dropped)
		}
	}
	// Half a token: still refused.
	now = now.Add(time.Second / failureLogRate / 2)
	f.record(row, failed, time.Millisecond)
	if len(h.lines) != failureLogBurst {
		t.Fatalf("a failure with half a token refilled was logged")
	}
	// A discard draws on its own limiter and does not report the warnings'
	// drops.
	f.record(row, discarded, time.Millisecond)
	if got := h.lines[len(h.lines)-1]; got.level != slog.LevelError || got.dropped != 0 {
		t.Fatalf("the discard logged as %+v, want an Error with no drops", got)
	}
	// A whole token: the next failure is logged and carries the 281 dropped.
	now = now.Add(time.Second / failureLogRate / 2)
	f.record(row, failed, time.Millisecond)
	if got := h.lines[len(h.lines)-1]; got.level != slog.LevelWarn || got.dropped != 300-failureLogBurst+1 {
		t.Fatalf("the line after the flood: %+v, want a Warn saying %d dropped", got, 300-failureLogBurst+1)
	}
	// The count started afresh: one more token, one more line, no drops.
	now = now.Add(time.Second / failureLogRate)
	f.record(row, failed, time.Millisecond)
	if got := h.lines[len(h.lines)-1]; got.dropped != 0 {
		t.Fatalf("the line after one with the flood's count says %d dropped, want 0", got.dropped)
	}

	// Any sequence: failures and discards at random instants. Whatever was
	// recorded up to each level's last line is that level's lines plus the
	// drops they report.
	h.lines = nil
	f = &failureLog{logger: slog.New(h), now: func() time.Time { return now }}
	rng := rand.New(rand.NewPCG(1, 2))
	var recorded, recordedAtLastLine [2]int64 // by level: Warn, Error
	for range 20000 {
		now = now.Add(time.Duration(rng.IntN(30)) * time.Millisecond)
		fin, lvl := failed, 0
		if rng.IntN(4) == 0 {
			fin, lvl = discarded, 1
		}
		before := len(h.lines)
		f.record(row, fin, time.Millisecond)
		recorded[lvl]++
		if len(h.lines) > before {
			recordedAtLastLine[lvl] = recorded[lvl]
		}
	}
	var accounted [2]int64
	for _, l := range h.lines {
		lvl := 0
		if l.level == slog.LevelError {
			lvl = 1
		}
		accounted[lvl] += 1 + l.dropped
	}
	if accounted != recordedAtLastLine {
		t.Fatalf("lines plus reported drops %v, want the failures recorded up to each level's last line %v", accounted, recordedAtLastLine)
	}
	if int64(len(h.lines)) == recorded[0]+recorded[1] {
		t.Fatalf("the random sequence dropped nothing: it does not exercise the limiter")
	}
}
