package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestFinishAnnouncements: ids announced by AnnounceFinished reach a
// ListenFinished subscription of the same schema, all of them, in payloads
// split under NOTIFY's limit; ListenFinished ends with its context.
func TestFinishAnnouncements(t *testing.T) {
	be := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ready := make(chan struct{})
	heard := make(chan []int64, 100)
	done := make(chan error, 1)
	lctx, stop := context.WithCancel(ctx)
	go func() {
		done <- be.ListenFinished(lctx, func() { close(ready) }, func(ids []int64) { heard <- ids })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ListenFinished ended before ready: %v", err)
	}
	// 2,000 ids of 7 digits need two payloads.
	want := make([]int64, 2000)
	for i := range want {
		want[i] = 1_000_000 + int64(i)
	}
	if err := be.AnnounceFinished(ctx, want); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) < len(want) {
		select {
		case ids := <-heard:
			got = append(got, ids...)
		case <-ctx.Done():
			t.Fatalf("heard %d of %d ids", len(got), len(want))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("heard %d ids, not the %d announced", len(got), len(want))
	}
	stop()
	if err := <-done; err == nil {
		t.Fatal("ListenFinished returned nil after its context ended")
	}
}
