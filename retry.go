package spool

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides how long a failed job waits before its next attempt.
type RetryPolicy interface {
	// NextRetry returns the backoff after the given attempt (1 after the
	// first run) failed.
	NextRetry(attempt int) time.Duration
}

// DefaultRetryPolicy backs off polynomially, attempt⁴ seconds, with ±10%
// jitter so that jobs that failed together do not retry together, capped at
// 7 days: 1 s, 16 s, 81 s, 4 min, 10 min … 25 attempts span about 3 weeks.
type DefaultRetryPolicy struct{}

// NextRetry implements RetryPolicy.
func (DefaultRetryPolicy) NextRetry(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	secs := math.Min(math.Pow(float64(attempt), 4), 7*24*3600)
	jitter := 0.9 + 0.2*rand.Float64()
	return time.Duration(secs * jitter * float64(time.Second))
}

// ConstantRetryPolicy retries after a fixed delay.
type ConstantRetryPolicy struct{ Delay time.Duration }

// NextRetry implements RetryPolicy.
func (p ConstantRetryPolicy) NextRetry(int) time.Duration { return p.Delay }
