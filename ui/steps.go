package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spoolq/spool"
)

// waitingText says what a scheduled job's last wait waits for: a signal
// not sent yet, or the end of a sleep; "" otherwise.
func waitingText(j *spool.JobRow, d *spool.JobDurable) string {
	if j.State != spool.JobStateScheduled || len(d.Steps) == 0 {
		return ""
	}
	if d.WaitSignal != "" {
		for _, s := range d.Signals {
			if s.Name == d.WaitSignal {
				return ""
			}
		}
		return fmt.Sprintf("for signal %q until %s UTC, then it times out", d.WaitSignal, j.RunAt.Format("2006-01-02 15:04:05"))
	}
	if strings.HasPrefix(d.Steps[len(d.Steps)-1].Name, "spool:sleep:") {
		return "asleep until " + j.RunAt.Format("2006-01-02 15:04:05") + " UTC"
	}
	return ""
}

// sendSignal sends the signal the job page's form names, with its JSON
// payload (empty: null).
func (h *Handler) sendSignal(r *http.Request, id int64) error {
	name := strings.TrimSpace(r.PostFormValue("name"))
	payload := strings.TrimSpace(r.PostFormValue("payload"))
	if payload == "" {
		payload = "null"
	}
	if !json.Valid([]byte(payload)) {
		return &statusError{http.StatusBadRequest, fmt.Sprintf("the payload %q is not JSON (quote a string: \"yes\")", payload)}
	}
	_, err := h.client.Signal(r.Context(), id, name, json.RawMessage(payload))
	return err
}
