package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// pragmaOf reads one PRAGMA on a connection.
func pragmaOf(t *testing.T, c *sql.Conn, name string) string {
	t.Helper()
	var v string
	if err := c.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// TestSettingsOnEveryConnection: the writer and every reader connection of
// the pools carry the backend's settings, not just the first one opened.
func TestSettingsOnEveryConnection(t *testing.T) {
	ctx := context.Background()
	be, err := OpenPath(ctx, filepath.Join(t.TempDir(), "s.db"), &Options{Readers: 3, Synchronous: SynchronousNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	w, err := be.st.writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "busy_timeout": "0", "query_only": "0", "temp_store": "2"} {
		if got := pragmaOf(t, w, name); got != want {
			t.Errorf("writer: %s = %s, want %s", name, got, want)
		}
	}
	_ = w.Close()
	// Hold all three reader connections at once, so each is a distinct one.
	var conns []*sql.Conn
	for i := 0; i < 3; i++ {
		c, err := be.st.readers.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		for name, want := range map[string]string{"synchronous": "1", "busy_timeout": "5000", "query_only": "1", "journal_mode": "wal"} {
			if got := pragmaOf(t, c, name); got != want {
				t.Errorf("reader %d: %s = %s, want %s", i, name, got, want)
			}
		}
		if _, err := c.ExecContext(ctx, "CREATE TABLE nope (x INTEGER)"); err == nil {
			t.Errorf("reader %d accepted a write", i)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

// TestSharedStorePerFile: backends of one process on one file share the
// writer; Separate ones do not; the last Close closes the connections.
func TestSharedStorePerFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	a, err := OpenPath(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenPath(ctx, filepath.Join(filepath.Dir(path), ".", "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenPath(ctx, path, &Options{Separate: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.st != b.st {
		t.Fatal("two backends on one file do not share a store")
	}
	if a.st == c.st {
		t.Fatal("a Separate backend shares a store")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.st.writer.PingContext(ctx); err != nil {
		t.Fatalf("store closed while still in use: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.st.writer.PingContext(ctx); err == nil {
		t.Fatal("store still open after the last Close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
