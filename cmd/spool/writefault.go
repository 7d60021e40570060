package main

import (
	"errors"
	"fmt"

	"github.com/spoolq/spool"
)

// hintError is an error with a second line telling the user what it means
// for them; it matches what it wraps.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "\n" + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// explainWriteFault adds to the error of a change that a connection fault
// ended whether the change is known not to have happened or may have
// happened, and what to do: again, which is safe; or check first (check
// says how), unless again is safe either way (again: the command changes
// only what is still to change). Other errors are returned as they are.
func explainWriteFault(err error, check string, idempotent bool) error {
	switch {
	case errors.Is(err, spool.ErrOutcomeUnknown):
		hint := "spool: the change may or may not have been made: the connection to the database failed after it was sent."
		if idempotent {
			hint += " Running the command again is safe: it changes only what is still to change."
		} else {
			hint += fmt.Sprintf(" Check with %s before running the command again.", check)
		}
		return &hintError{err: err, hint: hint}
	case errors.Is(err, spool.ErrNotWritten):
		return &hintError{err: err, hint: "spool: nothing was changed: the connection to the database failed before the change could commit. Running the command again is safe."}
	}
	return err
}
