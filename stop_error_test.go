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
	msg := e.Error()
	for _, want := range []string{`job 7 (kind "mail", attempt 2`, "; the outcomes of 12 job(s)", " job 100, job 101", " job 109 and 2 more: context deadline exceeded"} {
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
