package wakehub

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/spoolq/spool/backend"
)

// listen starts h.Listen in a goroutine and returns once it is subscribed,
// with a stop function that cancels it and returns Listen's error.
func listen(t *testing.T, h *Hub, onWake func(backend.Wake)) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- h.Listen(ctx, func() { close(ready) }, onWake) }()
	<-ready
	return func() error {
		cancel(errStop)
		return <-done
	}
}

var errStop = errors.New("stop listening")

func TestListenHearsWhatIsPublishedAfterReady(t *testing.T) {
	h := New()
	got := make(chan backend.Wake, 4)
	stop := listen(t, h, func(w backend.Wake) { got <- w })
	h.Publish(backend.Wake{Queue: "a"}, backend.Wake{CancelledID: 7})
	h.PublishQueues(map[string]struct{}{"b": {}})
	want := []backend.Wake{{Queue: "a"}, {CancelledID: 7}, {Queue: "b"}}
	for _, w := range want {
		if g := <-got; !reflect.DeepEqual(g, w) {
			t.Fatalf("heard %+v, want %+v", g, w)
		}
	}
	if err := stop(); !errors.Is(err, errStop) {
		t.Fatalf("Listen returned %v, want the context's cause %v", err, errStop)
	}
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d listeners still subscribed after Listen returned", n)
	}
}

func TestPublishDoesNotBlockOnASlowListener(t *testing.T) {
	h := New()
	block := make(chan struct{})
	heard := make(chan backend.Wake, Buffer+2)
	stop := listen(t, h, func(w backend.Wake) {
		heard <- w
		<-block // the listener takes the first wake-up and then stalls
	})
	h.Publish(backend.Wake{Queue: "first"})
	<-heard
	// Buffer wake-ups fill the stalled listener's buffer; the rest are
	// dropped rather than blocking the publisher (this test would hang).
	for range Buffer + 10 {
		h.Publish(backend.Wake{Queue: "more"})
	}
	close(block)
	for range Buffer {
		<-heard
	}
	if err := stop(); !errors.Is(err, errStop) {
		t.Fatalf("Listen returned %v, want %v", err, errStop)
	}
	if n := len(heard); n != 0 {
		t.Fatalf("listener heard %d wake-ups beyond its buffer of %d, want them dropped", n, Buffer)
	}
}
