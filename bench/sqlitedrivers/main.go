// Command sqlitedrivers measures the SQLite drivers Spool could use on Spool's
// own workload: bulk insert in 1,000-row transactions, then claim 1,000 rows
// per UPDATE … RETURNING and complete them by (id, fence) from a JSON array,
// until the table is drained. mattn/go-sqlite3 and ncruces/go-sqlite3 both
// register "sqlite3", so mattn is built with -tags mattn:
//
//	go build -tags mattn -o /tmp/sd-mattn . && go build -o /tmp/sd-pure .
//	for r in 1 2 3; do /tmp/sd-mattn -rounds 1 mattn; /tmp/sd-pure -rounds 1 modernc,ncruces; done
//
// Add -race to both builds to see the cost under the race detector.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const schema = `CREATE TABLE jobs(
 id INTEGER PRIMARY KEY, queue TEXT NOT NULL, kind TEXT NOT NULL, args BLOB NOT NULL,
 state INTEGER NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
 attempt INTEGER NOT NULL DEFAULT 0, fence INTEGER NOT NULL DEFAULT 0, leased_until INTEGER, leased_by TEXT,
 finalized_at INTEGER, tags TEXT NOT NULL DEFAULT '[]', metadata TEXT NOT NULL DEFAULT '{}');
CREATE INDEX jobs_pending ON jobs(queue, priority, run_at, id) WHERE state = 0;`

func open(drv, path string) *sql.DB {
	var db *sql.DB
	var err error
	prag := []string{"journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000"}
	switch drv {
	case "mattn":
		db, err = sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=5000&_txlock=immediate")
	case "modernc":
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	case "ncruces":
		db, err = ncOpen("file:" + path + "?_txlock=immediate")
		_ = prag
	}
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if drv == "ncruces" {
		for _, p := range prag {
			if _, err := db.Exec("PRAGMA " + p); err != nil {
				panic(err)
			}
		}
	}
	return db
}

func run(drv string, n int) {
	dir, _ := os.MkdirTemp("", "sqlb")
	defer os.RemoveAll(dir)
	db := open(drv, filepath.Join(dir, "x.db"))
	defer db.Close()
	ctx := context.Background()
	if _, err := db.Exec(schema); err != nil {
		panic(err)
	}
	// insert: 1000 rows per statement via json_each of arrays
	start := time.Now()
	const chunk = 1000
	argsArr := make([]string, chunk)
	for i := range argsArr {
		argsArr[i] = `{}`
	}
	ab, _ := json.Marshal(argsArr)
	for done := 0; done < n; done += chunk {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		if _, err := tx.Exec(`INSERT INTO jobs(queue,kind,args,state,priority,run_at) SELECT 'default','noop',value,0,0,unixepoch('subsec')*1000 FROM json_each(?)`, string(ab)); err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	ins := time.Since(start)
	start = time.Now()
	claimed := 0
	for {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		rows, err := tx.Query(`UPDATE jobs SET state=1, attempt=attempt+1, fence=fence+1, leased_until=unixepoch('subsec')*1000+30000, leased_by='c#1'
 WHERE id IN (SELECT id FROM jobs WHERE state=0 AND queue='default' AND run_at <= unixepoch('subsec')*1000 ORDER BY priority, run_at, id LIMIT 1000)
 RETURNING id, queue, kind, args, priority, run_at, attempt, fence, tags, metadata`)
		if err != nil {
			panic(err)
		}
		ids := make([]int64, 0, 1000)
		fences := make([]int64, 0, 1000)
		for rows.Next() {
			var id, pr, ra, at, fe int64
			var q, k, t, m string
			var a []byte
			if err := rows.Scan(&id, &q, &k, &a, &pr, &ra, &at, &fe, &t, &m); err != nil {
				panic(err)
			}
			ids = append(ids, id)
			fences = append(fences, fe)
		}
		rows.Close()
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		if len(ids) == 0 {
			break
		}
		claimed += len(ids)
		type pair struct {
			I int64 `json:"i"`
			F int64 `json:"f"`
		}
		ps := make([]pair, len(ids))
		for i := range ids {
			ps[i] = pair{ids[i], fences[i]}
		}
		pb, _ := json.Marshal(ps)
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		res, err := tx.Exec(`UPDATE jobs SET state=2, finalized_at=unixepoch('subsec')*1000, leased_until=NULL
 FROM (SELECT value->>'i' AS fid, value->>'f' AS ffence FROM json_each(?1)) AS f WHERE jobs.id = f.fid AND jobs.state=1 AND jobs.fence = f.ffence`, string(pb))
		if err != nil {
			panic(err)
		}
		if k, _ := res.RowsAffected(); k != int64(len(ids)) {
			panic(fmt.Sprint("affected ", k))
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	dr := time.Since(start)
	fmt.Printf("%-8s insert %6.0f/s  claim+complete %6.0f/s (%d)\n", drv, float64(n)/ins.Seconds(), float64(claimed)/dr.Seconds(), claimed)
}

func main() {
	jobs := flag.Int("jobs", 100000, "jobs per run")
	rounds := flag.Int("rounds", 3, "rounds; drivers alternate within a round")
	flag.Parse()
	for r := 0; r < *rounds; r++ {
		for _, d := range strings.Split(flag.Arg(0), ",") {
			run(d, *jobs)
		}
	}
}
