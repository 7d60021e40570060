package dashtest_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/conformance"
	"github.com/spoolq/spool/ui"
)

// FuzzFilters: whatever the job list's query holds, the answer is 200 when
// every filter is valid and 400 when one is not, never 500, and nothing is
// logged as an error (SQLite: the checks come before any query, so what
// they let through is what every backend takes).
func FuzzFilters(f *testing.F) {
	for _, seed := range [][7]string{
		{"", "", "", "", "", "", ""},
		{"mail", "note", "available", "2026-01-02T03:04", "", "", ""},
		{"", "\x00", "", "", "", "", ""},
		{"", "\xff", "", "", "", "", ""},
		{"", "a\xc3\x28", "", "", "", "", ""},
		{"", strings.Repeat("k", 256), "", "", "", "", ""},
		{"bad queue", "", "bogus", "0001-01-01T00:00", "10000-01-01T00:00", "-1", "x"},
		{"", "ok", "", "", "", "", "9223372036854775807"},
		{"", "", "", "", "", "9223372036854775807", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6])
	}
	var logs conformance.LogBuffer
	fx := newFixtureOn(f, "sqlite", &ui.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f.Fuzz(func(t *testing.T, queue, kind, state, since, until, before, after string) {
		q := url.Values{}
		for k, v := range map[string]string{"queue": queue, "kind": kind, "state": state, "since": since, "until": until, "before": before, "after": after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		valid := (queue == "" || spool.ValidateQueueName(queue) == nil) &&
			(kind == "" || spool.ValidateKind(kind) == nil) &&
			(state == "" || backend.State(state).Valid()) &&
			validTime(since) && validTime(until) && validCursor(before) && validCursor(after)
		r := httptest.NewRequest(http.MethodGet, "/jobs?"+q.Encode(), nil)
		r.Host = "localhost"
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, r)
		want := http.StatusBadRequest
		if valid {
			want = http.StatusOK
		}
		if rec.Code != want {
			t.Fatalf("%s: status %d, want %d\n%.500s", r.URL, rec.Code, want, rec.Body)
		}
		if l := logs.String(); l != "" {
			t.Fatalf("%s: logged %s", r.URL, l)
		}
	})
}

func validTime(s string) bool {
	if s == "" {
		return true
	}
	t, err := time.Parse("2006-01-02T15:04", s)
	return err == nil && !t.Before(spool.MinRunAt) && !t.After(spool.MaxRunAt)
}

func validCursor(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return s == "" || err == nil && n >= 0
}
