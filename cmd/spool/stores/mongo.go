//go:build spool_mongo

package stores

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/mongo"
)

func init() {
	s := &Support{Location: mongoLocation, NewScratch: newMongoScratch}
	for _, scheme := range []string{"mongodb", "mongodb+srv", "lungo"} {
		registry[scheme] = s
	}
}

// mongoLocation names the backend's database.
func mongoLocation(be backend.Backend) string {
	if m, ok := be.(*mongo.Backend); ok {
		return "database " + m.Database()
	}
	return ""
}

// newMongoScratch names a fresh database spool_bench_<hex> on the
// deployment dsn names (mongodb://), or a fresh embedded engine
// (lungo://spool_bench_<hex>). Drop drops the database, or closes the
// engine.
func newMongoScratch(dsn string) (*Scratch, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name scratch database: %w", err)
	}
	name := "spool_bench_" + hex.EncodeToString(b[:])
	if u.Scheme == "lungo" {
		return &Scratch{URL: "lungo://" + name, Name: "embedded engine " + name,
			Drop: func(context.Context) error { mongo.CloseEngine(name); return nil }}, nil
	}
	u.Path = "/" + name
	scratch := u.String()
	return &Scratch{URL: scratch, Name: name, Drop: func(ctx context.Context) error {
		be, err := mongo.Dial(ctx, scratch, name, mongo.Options{})
		if err != nil {
			return err
		}
		defer func() { _ = be.Close() }()
		return be.DropDatabase(ctx)
	}}, nil
}
