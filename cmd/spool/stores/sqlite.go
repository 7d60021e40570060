package stores

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/sqlite"
	"github.com/spoolq/spool/cmd/spool/cli"
)

func init() {
	registry["sqlite"] = &Support{
		Location:   sqliteLocation,
		NewScratch: newSQLiteScratch,
		File:       sqliteFile,
	}
}

// sqliteFile returns the path of the database file a sqlite:// URL names.
func sqliteFile(dsn string) (string, error) {
	path, _, err := sqlite.ParseURL(dsn)
	return path, err
}

// sqliteLocation names the backend's file.
func sqliteLocation(be backend.Backend) string {
	if s, ok := be.(*sqlite.Backend); ok {
		return "file " + s.Path()
	}
	return ""
}

// newSQLiteScratch names a fresh file spool_bench_<hex>.db: beside the file
// dsn names, or, for the default store, in a temporary directory of its own.
// The URL's parameters carry over. Drop removes the file and its -wal and
// -shm companions (and the temporary directory).
func newSQLiteScratch(dsn string) (*Scratch, error) {
	path, _, err := sqlite.ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	_, query, _ := strings.Cut(dsn, "?")
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name scratch file: %w", err)
	}
	name := "spool_bench_" + hex.EncodeToString(b[:]) + ".db"
	dir, tempDir := filepath.Dir(path), ""
	if dsn == cli.DefaultDatabaseURL {
		if tempDir, err = os.MkdirTemp("", "spool-bench-"); err != nil {
			return nil, fmt.Errorf("create scratch directory: %w", err)
		}
		dir = tempDir
	}
	file := filepath.Join(dir, name)
	url := "sqlite://" + file
	if query != "" {
		url += "?" + query
	}
	return &Scratch{
		URL:  url,
		Name: file,
		Drop: func(context.Context) error {
			var errs []error
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				if err := os.Remove(file + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
			if tempDir != "" {
				if err := os.Remove(tempDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
			if err := errors.Join(errs...); err != nil {
				return fmt.Errorf("remove scratch file %s: %w", file, err)
			}
			return nil
		},
	}, nil
}
