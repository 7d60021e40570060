package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/engine"
)

// Workers is the registry of workers by kind. Register with AddWorker before
// passing it to NewClient.
type Workers struct {
	mu    sync.RWMutex
	kinds map[string]engine.Handler
	// many holds the gathering rules of the kinds registered with
	// AddManyWorker; manyCount says how many there are, so that a
	// registry with none answers the producer's question per job
	// without a lock.
	many      map[string]*engine.ManyRules
	manyCount atomic.Int32
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{kinds: map[string]engine.Handler{}} }

// AddWorker registers w for the kind of T. It panics if the kind is empty or
// already registered: both are programming errors found at start-up.
func AddWorker[T JobArgs](ws *Workers, w Worker[T]) {
	if err := AddWorkerSafely(ws, w); err != nil {
		panic(err)
	}
}

// AddWorkerSafely is AddWorker returning an error instead of panicking.
func AddWorkerSafely[T JobArgs](ws *Workers, w Worker[T]) error {
	var zero T
	kind := kindOf(zero)
	if kind == "" {
		return fmt.Errorf("add worker for %T: %w: empty kind", zero, ErrInvalidConfig)
	}
	decode := func(row *JobRow) (*Job[T], error) {
		job := &Job[T]{JobRow: row}
		if err := json.Unmarshal(row.Args, &job.Args); err != nil {
			return nil, &engine.DecodeError{Err: err}
		}
		return job, nil
	}
	entry := engine.Handler{
		Run: func(ctx context.Context, row *JobRow) error {
			job, err := decode(row)
			if err != nil {
				return err
			}
			return w.Work(ctx, job)
		},
		Timeout: func(row *JobRow) time.Duration {
			if t, ok := w.(WorkerTimeout[T]); ok {
				return t.Timeout(&Job[T]{JobRow: row})
			}
			return 0
		},
		NextRetry: func(row *JobRow) (time.Duration, bool) {
			if r, ok := w.(WorkerNextRetry[T]); ok {
				return r.NextRetry(&Job[T]{JobRow: row}), true
			}
			return 0, false
		},
	}
	return ws.add(kind, entry, nil)
}

// add registers entry for kind, with the gathering rules of a many-worker
// (nil: a single-job worker).
func (ws *Workers) add(kind string, entry engine.Handler, many *engine.ManyRules) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.kinds == nil {
		ws.kinds = map[string]engine.Handler{}
	}
	if _, dup := ws.kinds[kind]; dup {
		return fmt.Errorf("add worker for kind %q: %w: kind registered twice", kind, ErrInvalidConfig)
	}
	ws.kinds[kind] = entry
	if many != nil {
		if ws.many == nil {
			ws.many = map[string]*engine.ManyRules{}
		}
		ws.many[kind] = many
		ws.manyCount.Add(1)
	}
	return nil
}

// manyRules returns the gathering rules of kind when it was registered
// with AddManyWorker, nil otherwise (and for a nil registry).
func (ws *Workers) manyRules(kind string) *engine.ManyRules {
	if ws == nil || ws.manyCount.Load() == 0 {
		return nil
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.many[kind]
}

// kindOf returns T's kind, also for pointer types whose zero value is nil.
func kindOf[T JobArgs](zero T) string {
	rt := reflect.TypeFor[T]()
	if rt.Kind() == reflect.Pointer {
		return reflect.New(rt.Elem()).Interface().(JobArgs).Kind()
	}
	return zero.Kind()
}

func (ws *Workers) has(kind string) bool {
	_, ok := ws.get(kind)
	return ok
}

// handler is the engine's view of the registry. A nil registry (an
// insert-only client) has no handlers.
func (ws *Workers) handler(kind string) (engine.Handler, bool) {
	if ws == nil {
		return engine.Handler{}, false
	}
	return ws.get(kind)
}

func (ws *Workers) get(kind string) (engine.Handler, bool) {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	e, ok := ws.kinds[kind]
	return e, ok
}

// Kinds lists the registered kinds.
func (ws *Workers) Kinds() []string {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	out := make([]string, 0, len(ws.kinds))
	for k := range ws.kinds {
		out = append(out, k)
	}
	return out
}
