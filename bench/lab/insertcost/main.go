// Command insertcost measures what a MariaDB server (its own, durable,
// pinned to CPU 0; this process on CPU 1) spends per job at a steady
// 1,000 inserts a second: minimal rows into a minimal table by plain
// autocommit INSERTs, the floor of a durable insert ("plain"); Spool's
// inserts with nobody reading them ("inserts"), with one
// process looking for new jobs and claiming none ("inserts+listen"), and
// with one process working them ("pickup"), in alternation. Issue 42
// item 1: the pickup's server CPU a job, taken apart. Run as root:
//
//	go run ./insertcost [-rounds 2]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strconv"
	"time"

	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	spoolmysql "github.com/spoolq/spool/backend/mysql"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/stores"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func main() {
	rounds := flag.Int("rounds", 2, "times to run the three phases")
	flag.Parse()
	modes := []string{"idle"}
	for range *rounds {
		modes = append(modes, "plain", "inserts", "inserts+listen", "pickup")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "insertcost-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err2 := dbserver.StartMariaDBWith(ctx, dir, dbserver.Options{Durable: true})
	if err2 != nil {
		log.Fatal(err2)
	}
	defer s.Stop()
	pin := func(pid int, cpus string) {
		for _, p := range append([]int{pid}, bench.ChildPIDs(pid)...) {
			_ = exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(p)).Run()
		}
	}
	pin(os.Getpid(), "1")
	pin(s.PID(), "0")
	cpu := func() time.Duration { d, _ := bench.TreeCPU(s.PID()); return d }
	for _, mode := range modes {
		scratch, err := stores.For(s.URL()).NewScratch(s.URL())
		if err != nil {
			log.Fatal(err)
		}
		be, err := backend.Open(ctx, scratch.URL)
		if err != nil {
			log.Fatal(err)
		}
		if err := be.Migrate(ctx); err != nil {
			log.Fatal(err)
		}
		ins, err := spool.NewClient(be, &spool.Config{})
		if err != nil {
			log.Fatal(err)
		}
		total := int64(10000)
		var rec *bench.PickupRecorder
		recBase := time.Now().Add(3 * time.Second)
		rec = bench.NewPickupRecorder(recBase, total)
		var wbe backend.Backend
		var wc *spool.Client
		if mode != "inserts" && mode != "idle" {
			wbe, err = backend.Open(ctx, scratch.URL)
			if err != nil {
				log.Fatal(err)
			}
			ws := spool.NewWorkers()
			var cfg spool.Config
			if mode == "pickup" {
				spool.AddWorker(ws, spool.WorkFunc(func(_ context.Context, j *spool.Job[bench.SteadyArgs]) error {
					rec.HandlerStartedAt(j.Args.Seq, time.Now())
					return nil
				}))
				cfg.Queues = map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 100}}
			} else {
				spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[bench.Noop]) error { return nil }))
				cfg.Queues = map[string]spool.QueueConfig{"other": {MaxWorkers: 100}}
			}
			cfg.Workers = ws
			wc, err = spool.NewClient(wbe, &cfg)
			if err != nil {
				log.Fatal(err)
			}
			if err := wc.Start(ctx); err != nil {
				log.Fatal(err)
			}
		}
		base := rec.Base
		if d := time.Until(base); d > 0 {
			time.Sleep(d)
		}
		load := &bench.SteadyLoad{Client: ins, Rate: 1000, Producers: 4, Rec: rec}
		c0 := cpu()
		if mode == "plain" {
			n, from, err := plainInserts(ctx, scratch.URL, base, total, base.Add(10*time.Second), cpu)
			if err != nil {
				log.Fatal(err)
			}
			load.Inserted.Store(n)
			c0 = from
		} else if mode == "idle" {
			time.Sleep(10 * time.Second)
		} else if err := load.Run(ctx, base, total, base.Add(10*time.Second)); err != nil {
			log.Fatal(err)
		}
		el := time.Since(base)
		c1 := cpu()
		n := max(1, load.Inserted.Load())
		var p50, p99 float64
		if mode == "pickup" {
			_ = bench.WaitStarted(ctx, rec, n)
			lat, _ := rec.Latencies(n)
			st := bench.Summarize(bench.Durations(lat))
			p50, p99 = st.P50, st.P99
		}
		fmt.Printf("%-15s jobs %5d in %.1fs: server %.0f µs/job, share %.3f; pickup p50 %.2f p99 %.2f ms\n", mode, n, el.Seconds(),
			float64(c1-c0)/float64(n)/1e3, float64(c1-c0)/float64(el), p50, p99)
		if wc != nil {
			_ = wc.Stop(ctx)
			_ = wbe.Close()
		}
		_ = be.Close()
		_ = scratch.Drop(ctx)
	}
}

// plainInserts inserts minimal rows into a table of its own (id, queue,
// args, run_at, state; one secondary index) at 1,000 a second from 4
// sessions, each row its own autocommit statement: what a durable one-row
// insert costs this server whatever the table. It returns the rows
// inserted and the server's CPU (cpu) when the first was due, after the
// table was made.
func plainInserts(ctx context.Context, url string, start time.Time, total int64, until time.Time, cpu func() time.Duration) (int64, time.Duration, error) {
	cfg, _, err := spoolmysql.ParseURL(url)
	if err != nil {
		return 0, 0, fmt.Errorf("parse the scratch URL: %w", err)
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("open plain table's pool: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS plain (id BIGINT AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(64) NOT NULL, args JSON NOT NULL, run_at DATETIME(6) NOT NULL, state TINYINT NOT NULL, KEY (queue, state, run_at, id)) ENGINE=InnoDB"); err != nil {
		return 0, 0, fmt.Errorf("create plain table: %w", err)
	}
	if d := time.Until(start); d > 0 {
		time.Sleep(d)
	}
	from := cpu()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seq := next.Add(1) - 1
				due := start.Add(time.Duration(seq) * time.Millisecond)
				if seq >= total || !due.Before(until) {
					return
				}
				time.Sleep(time.Until(due))
				if _, err := db.ExecContext(ctx, "INSERT INTO plain (queue, args, run_at, state) VALUES (?, ?, NOW(6), 0)", "default", fmt.Sprintf(`{"seq":%d}`, seq)); err != nil {
					errs[p] = err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return 0, 0, fmt.Errorf("insert into plain table: %w", e)
		}
	}
	return done.Load(), from, nil
}
