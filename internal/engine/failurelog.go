package engine

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/backend"
)

// Failure logging limits: each level (failed attempts at Warn, discards at
// Error) may log failureLogBurst lines at once and failureLogRate lines per
// second after that, so that a flood of failing jobs shows in the log
// without drowning it. A line logged after some were dropped carries
// not_logged_before_this: how many lines of its level were dropped since the
// previous line of that level was logged. Each drop is counted by exactly
// one later line, so a reader adds the counts up to get the total dropped.
const (
	failureLogRate  = 10
	failureLogBurst = 20
)

// logLimiter is a token bucket that counts what it refuses.
type logLimiter struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

// allow takes a token if one is left and, if it did, returns how many lines
// were refused since the previous one allowed (and starts counting afresh).
// A refused line returns 0: its drop is reported by the next line allowed.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = failureLogBurst
	} else {
		l.tokens = min(failureLogBurst, l.tokens+now.Sub(l.last).Seconds()*failureLogRate)
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// failureLog logs failed attempts and discarded jobs, rate-limited.
type failureLog struct {
	logger          *slog.Logger
	warn, errorRate logLimiter
	// now reads the clock the limiters refill by; nil means time.Now.
	// Tests set it to make the rate limit independent of the machine's
	// speed.
	now func() time.Time
}

// record logs the outcome a handler's run produced, if it is a failure:
// a retry at Warn with the next run time, a discard (asked for, or a retry
// past the last attempt, which the store turns into a discard) at Error. A
// cancellation the handler asked for is logged at Info.
func (f *failureLog) record(row *backend.JobRow, fin *backend.JobFinish, elapsed time.Duration) {
	var (
		level slog.Level
		msg   string
	)
	switch ResultOf(fin, row.Attempt, row.MaxAttempts) {
	case ResultFailed:
		level, msg = slog.LevelWarn, "spool: job failed; it will be retried"
	case ResultExhausted:
		level, msg = slog.LevelError, "spool: job failed on its last attempt and was discarded"
	case ResultDiscarded:
		level, msg = slog.LevelError, "spool: job discarded"
	case ResultCancelled:
		level, msg = slog.LevelInfo, "spool: job cancelled by its handler"
	default:
		return
	}
	if !f.logger.Enabled(context.Background(), level) {
		return
	}
	lim := &f.warn
	if level == slog.LevelError {
		lim = &f.errorRate
	}
	// The clock is read only for a failure: successes are most outcomes,
	// and reading it for each cost 3% of a no-op drain's client CPU.
	var now time.Time
	if f.now != nil {
		now = f.now()
	} else {
		now = time.Now()
	}
	ok, suppressed := lim.allow(now)
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.Int64("job_id", row.ID), slog.String("kind", row.Kind), slog.String("queue", row.Queue),
		slog.String("attempt", attemptOf(row)), slog.Duration("elapsed", elapsed.Round(time.Millisecond)),
	}
	if fin.Error != nil {
		attrs = append(attrs, slog.String("error", fin.Error.Error))
	}
	if level == slog.LevelWarn {
		// The client's estimate: the store adds the delay to its own clock.
		attrs = append(attrs, slog.Time("next_run_at", now.Add(fin.Delay).Round(time.Millisecond)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("not_logged_before_this", suppressed))
	}
	f.logger.LogAttrs(context.Background(), level, msg, attrs...)
}

func attemptOf(row *backend.JobRow) string {
	return strconv.Itoa(int(row.Attempt)) + "/" + strconv.Itoa(int(row.MaxAttempts))
}
