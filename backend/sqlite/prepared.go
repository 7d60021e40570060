package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// preparedStmts holds the hot path's statements prepared on the writer
// pool: the claim and the finishes by ids, compiled once per connection
// instead of at every call (SQLite compiles a statement in about the time
// it claims a few dozen jobs). Statements are prepared outside the write
// token, while the writer connection is free or about to be: a transaction
// holding the pool's one connection would make the prepare wait for it.
type preparedStmts struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

// prepared returns the writer pool's statement for query, preparing it on
// first use. Use it with tx.StmtContext on the store's own transactions
// only: a caller's transaction may belong to another pool.
func (st *store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	p := &st.stmts
	p.mu.Lock()
	s, ok := p.m[query]
	closed := p.closed
	p.mu.Unlock()
	if ok {
		return s, nil
	}
	if closed {
		return nil, errors.New("prepare: store closed")
	}
	s, err := st.writer.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[query]; ok || p.closed {
		// Prepared meanwhile by another goroutine, or the store closed.
		_ = s.Close()
		if ok {
			return old, nil
		}
		return nil, errors.New("prepare: store closed")
	}
	if p.m == nil {
		p.m = map[string]*sql.Stmt{}
	}
	p.m[query] = s
	return s, nil
}

// closeStmts closes every prepared statement; later prepares fail.
func (p *preparedStmts) closeStmts() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, s := range p.m {
		errs = append(errs, s.Close())
	}
	p.m = nil
	return errors.Join(errs...)
}
