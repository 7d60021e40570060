// Command lab runs Spool's laboratory experiments: chaos (workers killed,
// stalled and partitioned while a ledger audits every job), hosts (worker
// processes in network namespaces), failover (pg_auto_failover), shards,
// contention, ceiling (raw-SQL loops beside Spool's drain) and rowcost
// (what each index and written column of MariaDB's spool_jobs costs).
// They start their own database servers and namespaces through
// internal/testkit, so they live apart from the spool binary an operator
// installs; the scenarios a user runs against their own database stay in
// 'spool bench'.
//
// Exit codes are the spool command's: 0 on success (and for -h), 1 when an
// experiment fails, 2 for usage errors.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/bench/lab/internal/scenarios"
	"github.com/spoolq/spool/cmd/spool/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default handling so that a second
	// one kills the process even if a cleanup hangs.
	context.AfterFunc(ctx, stop)
	env := &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, StderrTerminal: cli.IsTerminal(os.Stderr), Program: "lab"}
	code := cli.Exit(env, scenarios.New(env).Run(ctx, os.Args[1:]))
	stop()
	os.Exit(code)
}
