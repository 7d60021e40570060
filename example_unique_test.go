package spool_test

import (
	"context"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// SyncAccount is the args of a job that refreshes one account.
type SyncAccount struct {
	AccountID int    `json:"account_id"`
	Reason    string `json:"reason"`
}

// Kind names the job type.
func (SyncAccount) Kind() string { return "sync_account" }

// ExampleUniqueOpts inserts a unique job twice: the second insert writes
// nothing and returns the job that holds the key. The key here is the
// kind and the args' account_id, so another account's job is inserted and
// a different reason is still a duplicate. See docs/unique.md.
func ExampleUniqueOpts() {
	ctx := context.Background()
	client, err := spool.NewClient(memory.New(), &spool.Config{Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	unique := &spool.InsertOpts{
		Unique: &spool.UniqueOpts{ByArgs: true, ArgsFields: []string{"account_id"}},
	}
	for _, args := range []SyncAccount{
		{AccountID: 42, Reason: "signup"},
		{AccountID: 42, Reason: "profile edit"}, // same account: a duplicate
		{AccountID: 7, Reason: "signup"},        // another account: a job of its own
	} {
		res, err := client.Insert(ctx, args, unique)
		if err != nil {
			panic(err)
		}
		fmt.Printf("account %d (%s): job %d, duplicate %t\n", args.AccountID, args.Reason, res.ID, res.Duplicate)
	}
	jobs, err := client.JobList(ctx, &spool.JobListParams{Kind: "sync_account"})
	if err != nil {
		panic(err)
	}
	fmt.Println("jobs stored:", len(jobs))
	// Output:
	// account 42 (signup): job 1, duplicate false
	// account 42 (profile edit): job 1, duplicate true
	// account 7 (signup): job 2, duplicate false
	// jobs stored: 2
}
