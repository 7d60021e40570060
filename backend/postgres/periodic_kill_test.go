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
// Every slot from the first job to the last has exactly one job: none lost
// in a failover, none fired twice.
func TestPeriodicExactlyOnceUnderLeaderKills(t *testing.T) {
	if dsn := os.Getenv(periodicChildEnv); dsn != "" {
		runPeriodicChild(dsn)
		return
	}
	be := testdb.Postgres(t)
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
	count := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+be.Schema()+`.spool_jobs WHERE kind = 'tick'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for kill := range 3 {
		l := leader()
		before := count()
		// A slot comes due at every multiple of periodicSlot: kill the
		// leader a millisecond after the next one.
		next := time.Now().Truncate(periodicSlot).Add(periodicSlot + time.Millisecond)
		time.Sleep(time.Until(next))
		l.kill()
		for i, c := range children {
			if c == l {
				children[i] = startPeriodicChild(t, dsn)
			}
		}
		// Wait for the new leader to fire past the kill.
		deadline := time.Now().Add(30 * time.Second)
		for count() < before+8 {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: no new slots fired within 30 s (%d jobs)", kill, count())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

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
		if !prev.IsZero() && at.Sub(prev) != periodicSlot {
			t.Errorf("slots missing between %s and %s", prev.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
		}
		prev = at
		slots++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if slots < 30 {
		t.Fatalf("only %d slots fired", slots)
	}
	t.Logf("%d slots, each fired once, across 3 leader kills", slots)
}
