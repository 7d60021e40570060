package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/sqlite"
)

// depthOf returns the deepest nesting of arrays and objects in a JSON value.
func depthOf(v any) int {
	switch x := v.(type) {
	case []any:
		d := 0
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case map[string]any:
		d := 0
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// hasNUL reports whether a decoded JSON value holds a NUL in a string or key.
func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// FuzzInsert feeds kinds, queues, tags, raw args, metadata, priorities and
// run times to Insert on SQLite. An insert either fails with the typed error
// and writes nothing, or stores a job that holds every limit and reads back
// exactly what was given.
func FuzzInsert(f *testing.F) {
	f.Add("note", "default", "t1", []byte(`{"n":1}`), []byte(`{}`), 0, int64(0))
	f.Add("note", "default", "t1", []byte(`{"s":"a\u0000b"}`), []byte(`{}`), 0, int64(0))
	f.Add("bad\xff", "default", "", []byte(`{}`), []byte(`{}`), 0, int64(0))
	f.Add("note", "q", "", []byte("{\"s\":\"a\xffb\"}"), []byte(`{}`), 0, int64(0))
	f.Add("note", "q", "", []byte(strings.Repeat("[", 32)+strings.Repeat("]", 32)), []byte(`{}`), 0, int64(0))
	f.Add("note", "q", "", []byte(`{}`), []byte(`{}`), 0, int64(9_400_000_000_000)) // year 300000 in seconds
	f.Add("note", ".hidden", "has space", []byte(`[1]`), []byte(`[1]`), 101, int64(-1))
	f.Add("note", "q", "", []byte(`{"s":"\\u0000 is text"}`), []byte(`{"a":"\ufffd"}`), 100, int64(253402300799))

	ctx := context.Background()
	be, err := sqlite.OpenPath(ctx, filepath.Join(f.TempDir(), "fuzz.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = be.Close() })
	if err := be.Migrate(ctx); err != nil {
		f.Fatal(err)
	}
	c, err := spool.NewClient(be, &spool.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind, queue, tag string, args, meta []byte, priority int, runAtSec int64) {
		opts := &spool.InsertOpts{Queue: queue, Priority: priority, Metadata: meta}
		if tag != "" {
			opts.Tags = []string{tag}
		}
		if runAtSec != 0 {
			opts.RunAt = time.Unix(runAtSec%(1<<40), 0)
		}
		res, err := c.Insert(ctx, spool.RawArgs(kind, args), opts)
		if err != nil {
			if !errors.Is(err, spool.ErrInvalidJob) {
				t.Fatalf("insert failed without the typed error: %v", err)
			}
			return
		}
		j, err := be.JobGet(ctx, res.ID)
		if err != nil {
			t.Fatalf("read back job %d: %v", res.ID, err)
		}
		if !utf8.ValidString(kind) || j.Kind != kind {
			t.Fatalf("kind %q accepted, stored as %q", kind, j.Kind)
		}
		var want, got any
		if err := json.Unmarshal(args, &want); err != nil {
			t.Fatalf("args that are not JSON were accepted: %q", args)
		}
		if !utf8.Valid(args) || hasNUL(want) || depthOf(want) > spool.MaxJSONDepth {
			t.Fatalf("args %q accepted beyond a limit", args)
		}
		if err := json.Unmarshal(j.Args, &got); err != nil {
			t.Fatalf("stored args do not decode: %v", err)
		}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if !bytes.Equal(wj, gj) {
			t.Fatalf("args %s stored as %s", wj, gj)
		}
		if !opts.RunAt.IsZero() && (!j.RunAt.Equal(opts.RunAt) || opts.RunAt.Before(spool.MinRunAt) || opts.RunAt.After(spool.MaxRunAt)) {
			t.Fatalf("run time %s accepted, stored as %s", opts.RunAt, j.RunAt)
		}
		if int(j.Priority) != priority || priority < spool.MinPriority || priority > spool.MaxPriority {
			t.Fatalf("priority %d accepted, stored as %d", priority, j.Priority)
		}
	})
}
