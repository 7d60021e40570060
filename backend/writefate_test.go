package backend_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/spoolq/spool/backend"
)

func TestWriteFate(t *testing.T) {
	cause := errors.New("unexpected EOF")
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("cancel job 1: %w: %w", backend.ErrNotWritten, cause), backend.FateNotWritten},
		{fmt.Errorf("finish jobs: %w: %w", backend.ErrOutcomeUnknown, cause), backend.FateOutcomeUnknown},
		{fmt.Errorf("cancel job 1: %w", backend.ErrInvalidState), backend.FateFailed},
		{cause, backend.FateFailed},
	} {
		if got := backend.WriteFate(c.err); got != c.want {
			t.Errorf("WriteFate(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
