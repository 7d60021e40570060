// Package benchtest holds the checks the bench scenarios' tests share,
// those of the spool binary's scenarios and those of the lab's.
package benchtest

import (
	"context"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/internal/testkit/testdb"
)

// SchemaExists reports whether a schema exists on the test server.
func SchemaExists(t testing.TB, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		t.Fatalf("look up schema %s: %v", schema, err)
	}
	return ok
}

// CheckStoresDropped fails the test if any of the scratch stores a run
// named is still there.
func CheckStoresDropped(t testing.TB, stores ...string) {
	t.Helper()
	pool := testdb.PostgresPool(t)
	if len(stores) == 0 {
		t.Error("the run named no scratch stores")
	}
	for _, s := range stores {
		if !strings.HasPrefix(s, "spool_bench_") {
			t.Errorf("store %q is not a spool_bench_ schema", s)
			continue
		}
		if SchemaExists(t, pool, s) {
			t.Errorf("scratch schema %s still exists after the run", s)
		}
	}
}

// CheckPlot fails the test unless path is a decodable PNG or a well-formed
// SVG with drawing in it.
func CheckPlot(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("plot not written: %v", err)
	}
	defer f.Close()
	if strings.HasSuffix(path, ".png") {
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 300 {
			t.Errorf("%s is only %v", path, b.Size())
		}
		return
	}
	d := xml.NewDecoder(f)
	elems := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			elems[se.Name.Local]++
		}
	}
	if elems["svg"] != 1 || elems["path"] == 0 || elems["text"] == 0 {
		t.Errorf("%s: elements %v, want an svg with lines and text", path, elems)
	}
}
