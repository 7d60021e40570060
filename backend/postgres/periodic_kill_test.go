package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/postgres"
	"github.com/spoolq/spool/internal/testkit/testdb"
)

// periodicChildEnv makes the test binary a client that fires the periodic
// job "tick" every periodicSlot on the store whose URL the variable holds,
// printing its client id, until it is killed.
const periodicChildEnv = "SPOOL_PERIODIC_CHILD_URL"

const periodicSlot = 250 * time.Millisecond

type tickArgs struct{}

func (tickArgs) Kind() string { return "tick" }

func runPeriodicChild(dsn string) {
	ctx := context.Background()
	be, err := postgres.Open(ctx, dsn)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ws := spool.NewWorkers()
	spool.AddWorker(ws, spool.WorkFunc(func(context.Context, *spool.Job[tickArgs]) error { return nil }))
	c, err := spool.NewClient(be, &spool.Config{
		Workers:       ws,
		Queues:        map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}},
		LeaseDuration: 3 * time.Second, // a leader's term of 5 s
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		PeriodicJobs: []spool.PeriodicJob{{
			Name:     "tick",
			Schedule: spool.Every(periodicSlot),
			Args:     func(time.Time) spool.JobArgs { return tickArgs{} },
		}},
	})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if err := c.Start(ctx); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("ID", c.ID())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	_ = c.Stop(ctx)
	os.Exit(0)
}

// periodicChild is a running child client.
type periodicChild struct {
	cmd *exec.Cmd
	id  string
}

func startPeriodicChild(t *testing.T, dsn string) *periodicChild {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestPeriodicExactlyOnceUnderLeaderKills$", "-test.count=1")
	cmd.Env = append(os.Environ(), periodicChildEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "ID "); ok {
			go func() {
				for lines.Scan() {
				}
			}()
			return &periodicChild{cmd: cmd, id: id}
		}
		if strings.HasPrefix(lines.Text(), "ERR") {
			t.Fatalf("child: %s", lines.Text())
		}
	}
	t.Fatalf("child exited before starting: %v", cmd.Wait())
	return nil
}

func (c *periodicChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
}

// TestPeriodicExactlyOnceUnderLeaderKills: two client processes share a
// periodic job with a slot every 250 ms. Three times, the leader is killed
// with SIGKILL a millisecond after a slot came due (as it fires) and a new
// process takes its place; each time the other client takes over when the
// dead leader's term ends, and fires the slots that came due meanwhile.
// Every slot from the start to the last job has exactly one job, none lost
// in a failover, and no slot has two.
func TestPeriodicExactlyOnceUnderLeaderKills(t *testing.T) {
	if dsn := os.Getenv(periodicChildEnv); dsn != "" {
		runPeriodicChild(dsn)
		return
	}
	be := newBackend(t)
	pool := testdb.PostgresPool(t)
	u, err := url.Parse(testdb.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(postgres.SchemaParam, be.Schema())
	u.RawQuery = q.Encode()
	dsn := u.String()
	ctx := context.Background()

	// The first slot that comes due once the first client runs.
	firstSlot := time.Now().Truncate(periodicSlot).Add(periodicSlot)
	children := []*periodicChild{startPeriodicChild(t, dsn), startPeriodicChild(t, dsn)}
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	leader := func() *periodicChild {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var id string
			err := pool.QueryRow(ctx, `SELECT leader_id FROM `+be.Schema()+`.spool_leader WHERE name = 'maintenance' AND expires_at > now()`).Scan(&id)
			if err == nil {
				for _, c := range children {
					if c.id == id {
						return c
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no live child leads after 30 s")
		return nil
	}
	// caughtUp waits until the leader has fired the slot that came due last:
	// a new leader first fires the last window's slots, oldest first, and a
	// kill in the middle of that would test the catch-up, not a failover.
	caughtUp := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var newest *time.Time
			if err := pool.QueryRow(ctx, `SELECT max(run_at) FROM `+be.Schema()+`.spool_jobs WHERE kind = 'tick'`).Scan(&newest); err != nil {
				t.Fatal(err)
			}
			if newest != nil && !newest.Before(time.Now().Add(-2*periodicSlot)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the leader has not fired the current slots after 30 s (newest %v)", what, newest)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for kill := range 3 {
		caughtUp(fmt.Sprintf("before kill %d", kill))
		l := leader()
		// A slot comes due at every multiple of periodicSlot: kill the
		// leader a millisecond after the next one, as it fires.
		next := time.Now().Truncate(periodicSlot).Add(periodicSlot + time.Millisecond)
		time.Sleep(time.Until(next))
		l.kill()
		for i, c := range children {
			if c == l {
				children[i] = startPeriodicChild(t, dsn)
			}
		}
	}
	caughtUp("after the last kill")

	rows, err := pool.Query(ctx, `SELECT run_at, count(*) FROM `+be.Schema()+`.spool_jobs WHERE kind = 'tick' GROUP BY run_at ORDER BY run_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prev time.Time
	slots := 0
	for rows.Next() {
		var at time.Time
		var n int
		if err := rows.Scan(&at, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("slot %s has %d jobs", at.UTC().Format(time.RFC3339Nano), n)
		}
		if at.UnixNano()%int64(periodicSlot) != 0 {
			t.Errorf("job at %s is not on a slot", at.UTC().Format(time.RFC3339Nano))
		}
		// Slots before the first client started are a catch-up of what no
		// client was up to fire: a leader fires the ones at most a window
		// late when it looks, so a leader killed in the middle of it leaves
		// its oldest ones to age out. From the start on, none is missing.
		if !prev.IsZero() && at.Sub(prev) != periodicSlot && !prev.Before(firstSlot) {
			t.Errorf("slots missing between %s and %s", prev.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
		}
		if !at.Before(firstSlot) {
			slots++
		}
		prev = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if slots < 30 {
		t.Fatalf("only %d slots fired", slots)
	}
	t.Logf("%d slots since the start, each fired once, across 3 leader kills", slots)
}
