package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbPrefix starts the name of every database and directory the peers
// benchmark creates, so that a leftover is easy to find.
const dbPrefix = "spool_peer_"

// freshStore is an empty store for one run.
type freshStore struct {
	URL  string // postgres:// or sqlite:// URL
	Path string // SQLite file, empty for PostgreSQL
	Name string
	drop func(ctx context.Context) error
}

// Drop removes the store. It does not depend on the run's context, so an
// interrupted run still cleans up.
func (s *freshStore) Drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.drop(ctx)
}

// storeMaker creates fresh stores: databases on one PostgreSQL server, and
// SQLite files in one directory.
type storeMaker struct {
	// pgURL is the database the CREATE DATABASE statements run in; fresh
	// databases get its other settings (host, user, parameters).
	pgURL string
	// sqliteDir holds a fresh directory per SQLite run (and per durable
	// Redis run).
	sqliteDir string
	// redisAddr is the shared Redis (host:port) of the asynq runs.
	redisAddr string
}

// moreStores makes the stores of kinds whose code is not in every build
// (Redis, only in the main build), by kind.
var moreStores = map[storeKind]func(m *storeMaker, ctx context.Context, name string) (*freshStore, error){}

// newStore creates an empty store of the given kind, named for the system.
func (m *storeMaker) newStore(ctx context.Context, kind storeKind, system string) (*freshStore, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name store: %w", err)
	}
	name := dbPrefix + strings.ReplaceAll(system, "-", "_") + "_" + hex.EncodeToString(b[:])
	switch kind {
	case storePostgres:
		return m.newPostgres(ctx, name)
	case storeSQLite:
		return m.newSQLite(name)
	}
	if f := moreStores[kind]; f != nil {
		return f(m, ctx, name)
	}
	return nil, fmt.Errorf("unknown store kind %q", kind)
}

func (m *storeMaker) newPostgres(ctx context.Context, name string) (*freshStore, error) {
	if m.pgURL == "" {
		return nil, fmt.Errorf("create database: no PostgreSQL URL (--database-url or $SPOOL_DATABASE_URL)")
	}
	u, err := url.Parse(m.pgURL)
	if err != nil {
		return nil, fmt.Errorf("create database: parse URL: %w", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := m.adminExec(ctx, `CREATE DATABASE `+ident); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return &freshStore{
		URL:  u.String(),
		Name: name,
		drop: func(ctx context.Context) error {
			if err := m.adminExec(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
				return fmt.Errorf("drop database %s: %w", name, err)
			}
			return nil
		},
	}, nil
}

// adminExec runs one statement on a connection of its own to pgURL.
func (m *storeMaker) adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, m.pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func (m *storeMaker) newSQLite(name string) (*freshStore, error) {
	dir, err := os.MkdirTemp(m.sqliteDir, name+"_")
	if err != nil {
		return nil, fmt.Errorf("create SQLite directory: %w", err)
	}
	path := filepath.Join(dir, "jobs.db")
	return &freshStore{
		URL:  "sqlite://" + path,
		Path: path,
		Name: dir,
		drop: func(context.Context) error {
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("remove %s: %w", dir, err)
			}
			return nil
		},
	}, nil
}
