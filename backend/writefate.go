package backend

import "errors"

// What a failed write's error says of the write, as WriteFate names it for
// log lines (the attribute write=…).
const (
	// FateNotWritten: the error matches ErrNotWritten; the write cannot
	// have committed.
	FateNotWritten = "not_written"
	// FateOutcomeUnknown: the error matches ErrOutcomeUnknown; the write
	// may have committed.
	FateOutcomeUnknown = "outcome_unknown"
	// FateFailed: the error is no connection fault the backend classified
	// (the store answered with an error, or the write was in the caller's
	// transaction, whose commit decides).
	FateFailed = "failed"
)

// WriteFate names what a failed write's error says about the write's
// commit, for the log lines of processes that retry their writes (the
// outcome writer, the heartbeat, maintenance): FateNotWritten,
// FateOutcomeUnknown, or FateFailed.
func WriteFate(err error) string {
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return FateOutcomeUnknown
	case errors.Is(err, ErrNotWritten):
		return FateNotWritten
	default:
		return FateFailed
	}
}
