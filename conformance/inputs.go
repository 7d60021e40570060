package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// inputEdgeTests are the conformance tests for edge inputs: values at and
// past the limits every backend must refuse identically.
func inputEdgeTests() []namedTest {
	return []namedTest{
		{"InputEdgesRefusedTyped", testInputEdgesRefused},
		{"InputEdgesAtLimitsRoundTrip", testInputEdgesAtLimits},
	}
}

// kindArgs is args of a kind chosen at run time.
type kindArgs struct {
	kind string
	S    string `json:"s"`
}

func (a kindArgs) Kind() string { return a.kind }

// nested returns JSON arrays nested depth levels deep around 1.
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth))
}

// testInputEdgesRefused: inputs no backend can store exactly are refused
// with the typed error before anything is written, identically everywhere.
func testInputEdgesRefused(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	far := time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		args  spool.JobArgs
		opts  *spool.InsertOpts
		field string
		is    error
	}{
		{"run time in year 300000", NoteArgs{}, &spool.InsertOpts{RunAt: far}, "run_at", nil},
		{"run time past MaxRunAt", NoteArgs{}, &spool.InsertOpts{RunAt: spool.MaxRunAt.Add(time.Microsecond)}, "run_at", nil},
		{"run time before 1970", NoteArgs{}, &spool.InsertOpts{RunAt: time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)}, "run_at", nil},
		{"kind with invalid UTF-8", kindArgs{kind: "bad\xff"}, nil, "kind", nil},
		{"args string with invalid UTF-8", kindArgs{kind: "note", S: "a\xffb"}, nil, "args", spool.ErrArgsUnstorable},
		{"raw args with invalid UTF-8", spool.RawArgs("note", json.RawMessage("{\"s\": \"a\xffb\"}")), nil, "args", spool.ErrArgsUnstorable},
		{"args with NUL", kindArgs{kind: "note", S: "a\x00b"}, nil, "args", spool.ErrArgsUnstorable},
		{"raw args with escaped NUL", spool.RawArgs("note", json.RawMessage(`{"s": "a\u0000b"}`)), nil, "args", spool.ErrArgsUnstorable},
		{"args nested too deep", spool.RawArgs("note", nested(spool.MaxJSONDepth+1)), nil, "args", spool.ErrArgsUnstorable},
		{"metadata nested too deep", NoteArgs{}, &spool.InsertOpts{Metadata: json.RawMessage(`{"a":` + string(nested(spool.MaxJSONDepth)) + `}`)}, "metadata", nil},
		{"metadata with NUL", NoteArgs{}, &spool.InsertOpts{Metadata: json.RawMessage(`{"a":"\u0000"}`)}, "metadata", nil},
	}
	for _, tc := range cases {
		_, err := c.Insert(ctx, tc.args, tc.opts)
		var ie *spool.InvalidJobError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: err = %v, want *InvalidJobError on %s", tc.name, err, tc.field)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: err = %v, want errors.Is %v", tc.name, err, tc.is)
		}
	}
	if got := countStates(t, be); len(got) != 0 {
		t.Fatalf("rows written by refused inserts: %v", got)
	}
}

// testInputEdgesAtLimits: values at the limits are stored and read back
// exactly: the first and last run times, the deepest nesting, a real U+FFFD
// and an escaped backslash before "u0000" (which is not a NUL).
func testInputEdgesAtLimits(t *testing.T, h Harness) {
	be := h.NewBackend(t)
	c := newClient(t, be, &spool.Config{Logger: quietLogger()})
	ctx := context.Background()
	for _, at := range []time.Time{spool.MaxRunAt, spool.MinRunAt} {
		id := insert(t, c, NoteArgs{}, &spool.InsertOpts{RunAt: at})
		j := getJob(t, be, id)
		if !j.RunAt.Equal(at) {
			t.Errorf("run time %s stored as %s", at, j.RunAt)
		}
		want := backend.StateAvailable
		if at.After(time.Now()) {
			want = backend.StateScheduled
		}
		if j.State != want {
			t.Errorf("run time %s: state %s, want %s", at, j.State, want)
		}
	}
	for _, raw := range []json.RawMessage{
		nested(spool.MaxJSONDepth),
		json.RawMessage(`{"s":"\ufffd is a real replacement character"}`),
		json.RawMessage(`{"s":"\\u0000 is text, not a NUL"}`),
		json.RawMessage(`{"s":"日本語 ünïcödé 🎉"}`),
	} {
		id := insert(t, c, spool.RawArgs("note", raw), nil)
		j := getJob(t, be, id)
		if !jsonEqual(t, j.Args, raw) {
			t.Errorf("args %s stored as %s", raw, j.Args)
		}
	}
	if _, err := c.Insert(ctx, kindArgs{kind: "ünïcödé kind"}, nil); err != nil {
		t.Errorf("a kind of valid UTF-8: %v", err)
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("stored args do not decode: %v", err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("args do not decode: %v", err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}
