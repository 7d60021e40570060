package stores

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/postgres"
)

func init() {
	s := &Support{
		Location:   postgresLocation,
		NewScratch: newPostgresScratch,
	}
	registry["postgres"] = s
	registry["postgresql"] = s
}

// postgresLocation names the backend's schema.
func postgresLocation(be backend.Backend) string {
	if pg, ok := be.(*postgres.Backend); ok {
		return fmt.Sprintf("schema %q", pg.Schema())
	}
	return ""
}

// newPostgresScratch names a fresh schema spool_bench_<hex> in the database
// dsn points at. The schema is created by Migrate and dropped by Drop over a
// connection of its own, so dropping works whatever state the backend is in.
func newPostgresScratch(dsn string) (*Scratch, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name scratch schema: %w", err)
	}
	schema := "spool_bench_" + hex.EncodeToString(b[:])
	if err := postgres.ValidateSchema(schema); err != nil {
		return nil, err
	}
	// The drop connection gets the database itself, without the backend's
	// spool_* options (pgx would send them to the server as settings).
	plainURL, pq := *u, u.Query()
	for k := range pq {
		if strings.HasPrefix(k, "spool_") {
			pq.Del(k)
		}
	}
	plainURL.RawQuery = postgres.EncodeQuery(pq)
	plain := plainURL.String()
	q := u.Query()
	q.Set(postgres.SchemaParam, schema)
	u.RawQuery = postgres.EncodeQuery(q)
	return &Scratch{
		URL:  u.String(),
		Name: schema,
		Drop: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, plain)
			if err != nil {
				return fmt.Errorf("drop schema %s: %w", schema, err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
				return fmt.Errorf("drop schema %s: %w", schema, err)
			}
			return nil
		},
	}, nil
}
