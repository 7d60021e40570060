package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spoolq/spool/backend"
)

// JobInsertDebounced implements backend.Backend in one transaction (the
// caller's, or one of its own): the key's row lock orders the inserts of
// one key, and the job's own row lock orders a move against a claim.
func (b *Backend) JobInsertDebounced(ctx context.Context, p *backend.JobDebounceParams) (*backend.JobDebounceResult, error) {
	var res *backend.JobDebounceResult
	run := func(tx DBTX) error {
		var cur *int64
		if err := tx.QueryRow(ctx, b.sql.await.debounceLock, p.Key).Scan(&cur); err != nil {
			return fmt.Errorf("lock key: %w", err)
		}
		if cur != nil {
			var args json.RawMessage
			if p.ReplaceArgs {
				args = p.Job.Args
			}
			r := &backend.JobDebounceResult{ID: *cur, Debounced: true}
			err := tx.QueryRow(ctx, b.sql.await.debounceMove, *cur, micros(p.Window), micros(p.MaxWait), args).Scan(&r.ID)
			if err == nil {
				res = r
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("move job %d: %w", *cur, err)
			}
		}
		job := *p.Job
		job.RunAt, job.Delay = nil, backend.DebounceFirstDelay(p.Window, p.MaxWait)
		job.UniqueKey, job.UniqueStates = "", 0
		ins, err := b.insertMany(ctx, &backend.JobInsertManyParams{Tx: tx, Jobs: []*backend.JobInsertParams{&job}})
		if err != nil {
			return err
		}
		r := &backend.JobDebounceResult{ID: ins.IDs[0]}
		if _, err := tx.Exec(ctx, b.sql.await.debounceSet, p.Key, r.ID); err != nil {
			return fmt.Errorf("point key at job %d: %w", r.ID, err)
		}
		res = r
		return nil
	}
	var err error
	if p.Tx != nil {
		var db DBTX
		if db, err = b.dbtx(p.Tx); err == nil {
			err = run(db)
		}
		if err != nil {
			err = insertError(p.Tx, err)
		}
	} else {
		err = b.ownTx(ctx, func(tx pgx.Tx) error { return run(tx) })
	}
	if err != nil {
		if missingObject(err) {
			err = backend.ExplainMissingObject(ctx, b, err)
		}
		return nil, fmt.Errorf("insert debounced job: %w", err)
	}
	return res, nil
}

// JobFinishedSince implements backend.Backend: a range scan of the index of
// finished jobs by finish time.
func (b *Backend) JobFinishedSince(ctx context.Context, p *backend.JobFinishedSinceParams) ([]*backend.FinishedJob, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = backend.DefaultListLimit
	}
	rows, err := b.pool.Query(ctx, b.sql.await.finishedSince, p.Since, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	var out []*backend.FinishedJob
	var j backend.FinishedJob
	_, err = pgx.ForEachRow(rows, []any{&j.ID, &j.Queue, &j.Kind, &j.State, &j.FinalizedAt}, func() error {
		c := j
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list finished jobs: %w", err)
	}
	return out, nil
}

// cleanupDebounce deletes the rows of debounced keys that stand for
// nothing pending (see debounceCleanup).
func (b *Backend) cleanupDebounce(ctx context.Context) error {
	if _, err := b.pool.Exec(ctx, b.sql.await.debounceCleanup); err != nil {
		return fmt.Errorf("clean up debounced keys: %w", err)
	}
	return nil
}

// finishChannel is the channel of finish announcements: the wake-up
// channel's name with ":finished", so that each schema has its own and
// the wake-up channel's payloads stay as they are.
func (b *Backend) finishChannel() string { return b.channel + ":finished" }

// finishPayloadMax keeps each announcement's payload under NOTIFY's limit
// of 8000 bytes.
const finishPayloadMax = 7900

// AnnounceFinished implements backend.FinishAnnouncer: one statement, one
// NOTIFY per 7,900 bytes of comma-separated ids.
func (b *Backend) AnnounceFinished(ctx context.Context, ids []int64) error {
	var payloads []string
	var sb strings.Builder
	for _, id := range ids {
		s := strconv.FormatInt(id, 10)
		if sb.Len()+len(s)+1 > finishPayloadMax {
			payloads = append(payloads, sb.String())
			sb.Reset()
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(s)
	}
	if sb.Len() > 0 {
		payloads = append(payloads, sb.String())
	}
	if len(payloads) == 0 {
		return nil
	}
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, b.finishChannel(), payloads); err != nil {
		return fmt.Errorf("announce finished jobs: %w", err)
	}
	return nil
}

// ListenFinished implements backend.FinishNotifier on a connection of its
// own (as Listen's), hearing the announcements of clients with
// Config.AnnounceFinishes.
func (b *Backend) ListenFinished(ctx context.Context, ready func(), onFinish func(ids []int64)) error {
	conn, err := b.listenConn(ctx)
	if err != nil {
		return fmt.Errorf("listen for finished jobs: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.finishChannel()}.Sanitize()); err != nil {
		return fmt.Errorf("listen for finished jobs: %w", err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("listen for finished jobs: %w", err)
		}
		var ids []int64
		for _, s := range strings.Split(n.Payload, ",") {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			onFinish(ids)
		}
	}
}
