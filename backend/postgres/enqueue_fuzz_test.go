package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/conformance"
)

// FuzzSQLEnqueue calls the SQL enqueue function on the PostgreSQL test
// server with any values. A call either stores a job that every Go-side
// limit accepts and that holds exactly the values passed, or fails with a
// data exception (SQLSTATE class 22, the caller's error) and writes nothing:
// never a constraint violation the function should have caught, never an
// internal error.
func FuzzSQLEnqueue(f *testing.F) {
	be := newBackend(f)
	ctx := context.Background()
	s := be.Schema()
	seeds := []struct {
		kind, args, queue string
		prio, runAtUS     int64
		maxAtt            int64
		tags, meta        string
	}{
		{"note", `{"n": 1}`, "default", 0, 0, 25, "", `{}`},
		{"email", `[1, "two", {"three": [3.0, null, true]}]`, "mail.high-1", 100, 253402300799999999, 1000, "a,b:c", `{"trace": "x"}`},
		{"", `{}`, "default", 0, 0, 25, "", `{}`},
		{"k\x00", `{}`, "default", 0, 0, 25, "", `{}`},
		{"note", `{"s": "\u0000"}`, "default", 0, 0, 25, "", `{}`},
		{"note", `{"s": "\\u0000"}`, "default", 0, 0, 25, "", `{}`},
		{"note", strings.Repeat("[", 32) + strings.Repeat("]", 32), "default", 0, 0, 25, "", `{}`},
		{"note", `{}`, ".q", -1, -1, 0, "has space", `[]`},
		{"note", `{}`, "q", 1 << 40, 253402300800000000, 1 << 31, "", `{"a": {"b": {}}}`},
		{"\u212a", `"just a string"`, "default", 50, -62135596800000000, 1, ",,", `null`},
		{"note", `{"n": 1}`, "default", 0, 0, 25, "NULL", `{}`},
		{"note", `{"deep": ` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`, "q", 3, 1, 25, "", `{}`},
		{"note", `{"deep": ` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`, "q", 3, 1, 25, "", `{}`},
	}
	for _, sd := range seeds {
		f.Add(sd.kind, sd.args, sd.queue, sd.prio, sd.runAtUS, sd.maxAtt, sd.tags, sd.meta)
	}
	count := func(t *testing.T) int {
		var n int
		if err := be.Pool().QueryRow(ctx, `SELECT count(*) FROM `+s+`.spool_jobs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	f.Fuzz(func(t *testing.T, kind, args, queue string, prio, runAtUS, maxAtt int64, tagList, meta string) {
		// An empty list is an empty array (a nil slice would be NULL, and
		// every call without tags would be refused before it reached the
		// rules); "NULL" is a NULL array.
		tags := []string{}
		switch tagList {
		case "":
		case "NULL":
			tags = nil
		default:
			tags = strings.Split(tagList, ",")
		}
		before := count(t)
		var id int64
		err := be.Pool().QueryRow(ctx, `SELECT `+s+`.enqueue($1, $2::jsonb, $3, $4::bigint::integer,
			timestamptz 'epoch' + $5::bigint * interval '1 microsecond', $6::bigint::integer, $7::text[], $8::jsonb)`,
			kind, args, queue, prio, runAtUS, maxAtt, tags, meta).Scan(&id)
		if err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "22") {
				t.Fatalf("enqueue(%q, %q, %q, %d, %d, %d, %q, %q) failed with something other than a data exception: %v",
					kind, args, queue, prio, runAtUS, maxAtt, tags, meta, err)
			}
			if after := count(t); after != before {
				t.Fatalf("a refused call wrote %d rows: %v", after-before, err)
			}
			return
		}
		j, err := be.JobGet(ctx, id)
		if err != nil {
			t.Fatalf("job %d enqueued from SQL cannot be read: %v", id, err)
		}
		if err := conformance.WithinLimits(j); err != nil {
			t.Fatalf("enqueue(%q, %q, %q, %d, %d, %d, %q, %q) stored a job the Go API would refuse: %v",
				kind, args, queue, prio, runAtUS, maxAtt, tags, meta, err)
		}
		var same bool
		if err := be.Pool().QueryRow(ctx, `SELECT args = $2::jsonb AND metadata = $3::jsonb
			AND run_at = timestamptz 'epoch' + $4::bigint * interval '1 microsecond'
			FROM `+s+`.spool_jobs WHERE id = $1`, id, args, meta, runAtUS).Scan(&same); err != nil {
			t.Fatal(err)
		}
		if !same || j.Kind != kind || j.Queue != queue || int64(j.Priority) != prio || int64(j.MaxAttempts) != maxAtt ||
			strings.Join(j.Tags, ",") != strings.Join(tags, ",") {
			t.Fatalf("enqueue(%q, %q, %q, %d, %d, %d, %q, %q) stored something else: %+v", kind, args, queue, prio, runAtUS, maxAtt, tags, meta, j)
		}
	})
}
