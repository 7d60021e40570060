package spool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// ExampleJobFilter cancels, retries and deletes jobs by filter. Each action
// changes only the jobs in the states it applies to, so running it again
// changes nothing; an empty filter is refused. See docs/bulk.md.
func ExampleJobFilter() {
	ctx := context.Background()
	client, err := spool.NewClient(memory.New(), &spool.Config{Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	for _, queue := range []string{"reports", "reports", "reports", "mail"} {
		_, err := client.Insert(ctx, WelcomeEmail{To: "ada@example.com"}, &spool.InsertOpts{Queue: queue, Delay: time.Hour})
		if err != nil {
			panic(err)
		}
	}
	reports := spool.JobFilter{Queue: "reports"}

	res, err := client.JobsCancel(ctx, reports)
	if err != nil {
		panic(err)
	}
	fmt.Println("cancelled:", res.Changed)
	res, err = client.JobsCancel(ctx, reports)
	if err != nil {
		panic(err)
	}
	fmt.Println("cancelled again:", res.Changed)

	res, err = client.JobsRetry(ctx, spool.JobFilter{Queue: "reports", States: []spool.JobState{spool.JobStateCancelled}})
	if err != nil {
		panic(err)
	}
	fmt.Println("retried:", res.Changed)

	res, err = client.JobsDelete(ctx, reports)
	if err != nil {
		panic(err)
	}
	fmt.Println("deleted:", res.Changed)

	_, err = client.JobsDelete(ctx, spool.JobFilter{})
	fmt.Println("empty filter refused:", errors.Is(err, spool.ErrInvalidConfig))

	stats, err := client.QueueStats(ctx)
	if err != nil {
		panic(err)
	}
	for _, q := range stats {
		fmt.Println("left in", q.Queue, q.Counts)
	}
	// Output:
	// cancelled: 3
	// cancelled again: 0
	// retried: 3
	// deleted: 3
	// empty filter refused: true
	// left in mail map[scheduled:1]
}
