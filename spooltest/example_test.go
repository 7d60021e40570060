package spooltest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
	"github.com/spoolq/spool/spooltest"
)

// SendEmail is the args of the application's mail job.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
}

// Kind names the job type.
func (SendEmail) Kind() string { return "send_email" }

// signup is the application's code under test: it enqueues a welcome mail.
func signup(ctx context.Context, client *spool.Client, email string) error {
	_, err := client.Insert(ctx, SendEmail{To: email, Subject: "Welcome"}, &spool.InsertOpts{Queue: "mail"})
	return err
}

// Example checks what the application enqueued and runs the worker on a
// job, as tests would. In a test file each check is a Test function given
// its *testing.T; here run stands in for the test runner.
func Example() {
	ctx := context.Background()
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[SendEmail]) error {
		if job.Args.To == "" {
			return errors.New("no address")
		}
		return nil // a real worker sends the mail
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{Workers: workers})
	if err != nil {
		panic(err)
	}

	run("signup enqueues a welcome mail", func(t testing.TB) {
		if err := signup(ctx, client, "ada@example.com"); err != nil {
			t.Fatal(err)
		}
		// Subject is left out of the expected args, so any subject matches.
		job := spooltest.RequireInserted(ctx, t, client, SendEmail{To: "ada@example.com"}, &spooltest.Opts{Queue: "mail"})
		fmt.Println("  found job", job.ID, "in state", job.State)
		spooltest.RequireNotInserted(ctx, t, client, SendEmail{To: "bob@example.com"}, nil)
	})
	run("a mail nobody enqueued", func(t testing.TB) {
		spooltest.RequireInserted(ctx, t, client, SendEmail{To: "cy@example.com"}, nil)
	})
	run("the worker sends a mail", func(t testing.TB) {
		job := spooltest.Work(ctx, t, client, SendEmail{To: "ada@example.com"}, nil)
		fmt.Println("  worked job", job.ID, "now", job.State)
	})
	run("the worker refuses a mail without address", func(t testing.TB) {
		job := spooltest.Work(ctx, t, client, SendEmail{}, &spool.InsertOpts{MaxAttempts: 1})
		fmt.Println("  worked job", job.ID, "now", job.State, "with error:", job.Errors[0].Error)
	})
	// Output:
	// signup enqueues a welcome mail
	//   found job 1 in state available
	//   PASS
	// a mail nobody enqueued
	//   FAIL: spooltest: 0 jobs of kind "send_email" match {"to":"cy@example.com"}, want exactly 1
	// the worker sends a mail
	//   worked job 2 now completed
	//   PASS
	// the worker refuses a mail without address
	//   worked job 3 now discarded with error: no address
	//   PASS
}

// run runs check as a test would, printing PASS or the failure.
func run(name string, check func(t testing.TB)) {
	fmt.Println(name)
	t := &printT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(t)
	}()
	<-done
	if !t.failed {
		fmt.Println("  PASS")
	}
}

// printT is the part of a *testing.T that spooltest uses; it prints
// failures. (The embedded interface is nil: other methods are not called.)
type printT struct {
	testing.TB
	failed bool
}

func (t *printT) Helper() {}

func (t *printT) Errorf(format string, args ...any) {
	t.failed = true
	fmt.Printf("  FAIL: "+format+"\n", args...)
}

func (t *printT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit() // as testing does: the check stops here
}

func (t *printT) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
