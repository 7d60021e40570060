package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// riverPoolConns is the size of River's pgx pool: the same as Spool's
// backend.Open pool, so neither wins by connections. (pgxpool's own default
// is max(4, GOMAXPROCS), 4 on a 2-core machine.)
const riverPoolConns = 16

func init() {
	run := func(ctx context.Context, spec *runSpec) (*runResult, error) {
		return runRiver(ctx, spec, openRiverPostgres, "river "+moduleVersion("github.com/riverqueue/river"))
	}
	registerRunner("river", run)
	registerRunner("river-2000", run) // the concurrency comes in the spec
}

// openRiverPostgres opens River's pgx v5 driver over a pool of its own.
func openRiverPostgres(ctx context.Context, spec *runSpec) (*riverStore[pgx.Tx], error) {
	cfg, err := pgxpool.ParseConfig(spec.URL)
	if err != nil {
		return nil, fmt.Errorf("river pool: %w", err)
	}
	cfg.MaxConns = riverPoolConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("river pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river pool: %w", err)
	}
	return &riverStore[pgx.Tx]{
		driver: riverpgxv5.New(pool),
		count: func(ctx context.Context, query string) (int64, error) {
			var n int64
			if err := pool.QueryRow(ctx, query).Scan(&n); err != nil {
				return 0, fmt.Errorf("count river jobs: %w", err)
			}
			return n, nil
		},
		settings: map[string]string{
			"driver": "riverpgxv5 " + moduleVersion("github.com/riverqueue/river/riverdriver/riverpgxv5"),
			"pool":   fmt.Sprintf("pgxpool, %d conns, prepared statements (pgx default)", riverPoolConns),
		},
		close: pool.Close,
	}, nil
}
