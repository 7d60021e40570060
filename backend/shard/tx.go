package shard

import (
	"context"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

// Tx is a caller's transaction tagged with the shard whose database it
// belongs to: the backend.Tx that InsertTx and CompleteTx take with a
// sharded backend. Tx is the shard backend's own transaction type (a pgx.Tx
// for PostgreSQL). Find the shard with QueueShard, KeyShard or JobShard.
type Tx struct {
	Shard int
	Tx    backend.Tx
}

// LazyTx is a transaction begun on whichever shard the first call that uses
// it needs, for callers that hold a connection to every shard. Later calls
// that need another shard are refused with ErrWrongShard. The caller ends
// the transaction: with Commit and Rollback when the shard's transaction
// type has context-taking ones (pgx.Tx does), or through Bound.
type LazyTx struct {
	begin func(ctx context.Context, shard int) (backend.Tx, error)

	mu    sync.Mutex
	shard int
	tx    backend.Tx
}

// NewLazyTx returns a transaction that begin opens on a shard when first
// needed.
func NewLazyTx(begin func(ctx context.Context, shard int) (backend.Tx, error)) *LazyTx {
	return &LazyTx{begin: begin}
}

// Bound returns the shard and the transaction begun on it; ok is false while
// no call has needed one.
func (t *LazyTx) Bound() (shard int, tx backend.Tx, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.shard, t.tx, t.tx != nil
}

// ender is a transaction type with context-taking Commit and Rollback.
type ender interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Commit commits the transaction begun on a shard; with none begun, there
// is nothing to commit and it returns nil.
func (t *LazyTx) Commit(ctx context.Context) error {
	return t.end(ctx, "commit", ender.Commit)
}

// Rollback rolls the transaction back; with none begun it returns nil.
func (t *LazyTx) Rollback(ctx context.Context) error {
	return t.end(ctx, "roll back", ender.Rollback)
}

func (t *LazyTx) end(ctx context.Context, op string, f func(ender, context.Context) error) error {
	s, tx, ok := t.Bound()
	if !ok {
		return nil
	}
	e, ok := tx.(ender)
	if !ok {
		return fmt.Errorf("%s: the transaction on shard %d is a %T, which has no Commit(ctx) and Rollback(ctx): end it through Bound", op, s, tx)
	}
	return f(e, ctx)
}

// on returns the transaction on shard s, beginning it if none is.
func (t *LazyTx) on(ctx context.Context, s int) (backend.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tx != nil {
		if t.shard != s {
			return nil, fmt.Errorf("%w: begun on shard %d, the jobs are on shard %d", ErrWrongShard, t.shard, s)
		}
		return t.tx, nil
	}
	tx, err := t.begin(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("begin transaction on shard %d: %w", s, err)
	}
	t.shard, t.tx = s, tx
	return tx, nil
}

// txShard returns the shard a caller's transaction is on: -1 for a LazyTx
// not begun yet. Other types are refused with backend.ErrTxType.
func txShard(t backend.Tx) (int, error) {
	switch t := t.(type) {
	case Tx:
		return t.Shard, nil
	case *Tx:
		return t.Shard, nil
	case *LazyTx:
		if s, _, ok := t.Bound(); ok {
			return s, nil
		}
		return -1, nil
	}
	return 0, fmt.Errorf("%w: %T (a sharded backend takes shard.Tx or *shard.LazyTx, which say the transaction's shard)", backend.ErrTxType, t)
}

// txOn returns the shard backend's transaction of t for shard s: nil for
// none, ErrWrongShard when t is on another shard.
func (b *Backend) txOn(ctx context.Context, t backend.Tx, s int) (backend.Tx, error) {
	var tagged Tx
	switch v := t.(type) {
	case nil:
		return nil, nil
	case *LazyTx:
		return v.on(ctx, s)
	case Tx:
		tagged = v
	case *Tx:
		tagged = *v
	default:
		_, err := txShard(t)
		return nil, err
	}
	if tagged.Shard < 0 || tagged.Shard >= len(b.shards) {
		return nil, fmt.Errorf("%w: shard %d of %d", backend.ErrTxType, tagged.Shard, len(b.shards))
	}
	if tagged.Shard != s {
		return nil, fmt.Errorf("%w: the transaction is on shard %d, the jobs are on shard %d", ErrWrongShard, tagged.Shard, s)
	}
	return tagged.Tx, nil
}
