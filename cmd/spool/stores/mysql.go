package stores

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	drv "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mysql"
)

func init() {
	registry["mysql"] = &Support{
		Location:   mysqlLocation,
		NewScratch: newMySQLScratch,
	}
}

// mysqlLocation names the backend's database.
func mysqlLocation(be backend.Backend) string {
	if my, ok := be.(*mysql.Backend); ok {
		return fmt.Sprintf("database %q", my.Database())
	}
	return ""
}

// newMySQLScratch creates a fresh database spool_bench_<hex> on the server
// dsn points at and returns its URL (dsn's parameters kept). The database
// must exist before the backend opens, so it is created here; Drop removes it
// over a connection of its own.
func newMySQLScratch(dsn string) (*Scratch, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg, _, err := mysql.ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name scratch database: %w", err)
	}
	name := "spool_bench_" + hex.EncodeToString(b[:])
	if err := mysql.ValidateDatabase(name); err != nil {
		return nil, err
	}
	admin := func(ctx context.Context, stmt string) error {
		connector, err := drv.NewConnector(cfg)
		if err != nil {
			return err
		}
		db := sql.OpenDB(connector)
		defer db.Close()
		_, err = db.ExecContext(ctx, stmt)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return &Scratch{
		URL:  u.String(),
		Name: name,
		Drop: func(ctx context.Context) error {
			if err := admin(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
				return fmt.Errorf("drop database %s: %w", name, err)
			}
			return nil
		},
	}, nil
}
