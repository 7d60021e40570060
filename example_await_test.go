package spool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// Thumbnail is the args of a job that renders an image's thumbnail.
type Thumbnail struct {
	ImageID int `json:"image_id"`
}

// Kind names the job type.
func (Thumbnail) Kind() string { return "thumbnail" }

// ExampleUniqueOpts_debounce inserts one debounced key three times in a
// row: the first insert makes a job that runs a second after it, the next
// two move that job (keeping its first insert's run at most five seconds
// away) and take their args in turn. See docs/unique.md#debounce.
func ExampleUniqueOpts_debounce() {
	ctx := context.Background()
	client, err := spool.NewClient(memory.New(), &spool.Config{Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	opts := &spool.InsertOpts{Unique: &spool.UniqueOpts{Key: "user-7", Debounce: &spool.DebounceOpts{
		Window: time.Second, MaxWait: 5 * time.Second, ReplaceArgs: true}}}
	for id := range 3 {
		res, err := client.Insert(ctx, Thumbnail{ImageID: id}, opts)
		if err != nil {
			panic(err)
		}
		fmt.Printf("insert %d: job %d, moved an existing one %t\n", id, res.ID, res.Duplicate)
	}
	job, err := client.JobGet(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("job 1: %s, args %s, runs within 5s of its creation: %t\n",
		job.State, job.Args, !job.RunAt.After(job.CreatedAt.Add(5*time.Second)))
	// Output:
	// insert 0: job 1, moved an existing one false
	// insert 1: job 1, moved an existing one true
	// insert 2: job 1, moved an existing one true
	// job 1: scheduled, args {"image_id":2}, runs within 5s of its creation: true
}

// ExampleClient_Await inserts a job and waits for its result, which a
// worker records; the worker could be in any process. See docs/await.md.
func ExampleClient_Await() {
	ctx := context.Background()
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, j *spool.Job[Thumbnail]) error {
		return spool.RecordOutput(ctx, map[string]string{"url": fmt.Sprintf("/thumbs/%d.png", j.Args.ImageID)})
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{Logger: quietLogger(), Workers: workers,
		Queues: map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 2}}})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	res, err := client.Insert(ctx, Thumbnail{ImageID: 7}, nil)
	if err != nil {
		panic(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	job, err := client.Await(wait, res.ID)
	if err != nil {
		panic(err)
	}
	var out struct{ URL string }
	if err := json.Unmarshal(job.Output, &out); err != nil {
		panic(err)
	}
	fmt.Println(job.State, out.URL)
	// Output:
	// completed /thumbs/7.png
}
