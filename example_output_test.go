package spool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend/memory"
)

// BuildReport is the args of a job that builds a report in parts.
type BuildReport struct {
	Parts []string `json:"parts"`
}

// Kind names the job type.
func (BuildReport) Kind() string { return "build_report" }

// ReportOutput is what a report job produced.
type ReportOutput struct {
	File string `json:"file"`
	Rows int    `json:"rows"`
}

// ExampleRecordOutput records a job's progress in its metadata while it
// runs, and its output: both are written at once, under the job's lease,
// and read back with JobGet (or spool jobs show). See docs/output.md.
func ExampleRecordOutput() {
	ctx := context.Background()
	workers := spool.NewWorkers()
	spool.AddWorker(workers, spool.WorkFunc(func(ctx context.Context, job *spool.Job[BuildReport]) error {
		rows := 0
		for i, part := range job.Args.Parts {
			rows += len(part) // build the part
			progress := map[string]any{"progress": 100 * (i + 1) / len(job.Args.Parts)}
			if err := spool.UpdateMetadata(ctx, progress); err != nil {
				return err // ErrLeaseLost: the job was cancelled or rescued
			}
		}
		return spool.RecordOutput(ctx, ReportOutput{File: "report.csv", Rows: rows})
	}))
	client, err := spool.NewClient(memory.New(), &spool.Config{
		Workers: workers,
		Queues:  map[string]spool.QueueConfig{spool.DefaultQueue: {MaxWorkers: 1}},
		Logger:  quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	done, end := client.Subscribe(spool.EventJobCompleted)
	defer end()
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	res, err := client.Insert(ctx, BuildReport{Parts: []string{"ab", "cde", "f"}},
		&spool.InsertOpts{Metadata: json.RawMessage(`{"requested_by":"ada"}`)})
	if err != nil {
		panic(err)
	}
	<-done
	job, err := client.JobGet(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("metadata:", string(job.Metadata))
	fmt.Println("output:", string(job.Output))

	err = spool.RecordOutput(ctx, ReportOutput{}) // not a job's context
	fmt.Println("outside a job:", errors.Is(err, spool.ErrNotInJob))
	// Output:
	// metadata: {"progress":100,"requested_by":"ada"}
	// output: {"file":"report.csv","rows":6}
	// outside a job: true
}
