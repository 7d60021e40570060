package spool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

// TestStopTimeoutErrorMessage: the message names up to ten jobs of each
// list, then how many more, and the error matches the stop context's.
func TestStopTimeoutErrorMessage(t *testing.T) {
	e := &spool.StopTimeoutError{Err: context.DeadlineExceeded}
	for i := range 12 {
		e.Unwritten = append(e.Unwritten, int64(100+i))
	}
	e.Jobs = []spool.StuckJob{{ID: 7, Kind: "mail", Attempt: 2}}
	e.Claims = []spool.StopClaim{{Queue: "q", ID: "c#1", Max: 5, InFlight: true}, {Queue: "q", ID: "c#0", Max: 3}}
	msg := e.Error()
	for _, want := range []string{`job 7 (kind "mail", attempt 2`, "; the outcomes of 12 job(s)", " job 100, job 101", " job 109 and 2 more;",
		` 2 claim(s) whose jobs are unknown: claim c#1 of queue "q" (in flight, its reply never came: up to 5 job(s), released when it comes),` +
			` claim c#0 of queue "q" (reply lost, release not written: up to 3 job(s), held until their leases end): context deadline exceeded`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "job 110") {
		t.Errorf("message %q names more than ten unwritten jobs", msg)
	}
	if !errors.Is(e, context.DeadlineExceeded) {
		t.Error("StopTimeoutError does not match its context's error")
	}
}
