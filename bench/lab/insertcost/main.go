// Command insertcost measures what a MariaDB server (its own, durable,
// pinned to CPU 0; this process on CPU 1) spends per job at a steady
// 1,000 inserts a second: with nobody reading them ("inserts"), with one
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

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/cmd/spool/bench"
	"github.com/spoolq/spool/cmd/spool/stores"
	"github.com/spoolq/spool/internal/testkit/dbserver"
)

func main() {
	rounds := flag.Int("rounds", 2, "times to run the three phases")
	flag.Parse()
	modes := []string{"idle"}
	for range *rounds {
		modes = append(modes, "inserts", "inserts+listen", "pickup")
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
		if mode == "idle" {
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
