package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spoolq/spool/backend"
)

// Tx is a transaction on a memory store, the backend.Tx that InsertTx,
// InsertManyTx and CompleteTx take with this backend. Inserts made in it are
// invisible until Commit and vanish on Rollback. A completion made in it is
// checked against the job's lease when it is made and applied at Commit,
// which fails with ErrConflict, applying nothing, if the lease moved on
// meanwhile. It holds no lock between calls, so other work goes on while it
// is open.
type Tx struct {
	s *store

	mu       sync.Mutex
	done     bool
	inserts  []*backend.JobRow
	finishes []txFinish
	steps    []txStep
	// commits run at Commit, under the store's lock: the records of
	// workflows and batches inserted in the transaction.
	commits []func(*store)
}

type txStep struct {
	lease backend.LeaseRef
	row   backend.StepRow
}

func (tx *Tx) addStep(l backend.LeaseRef, row backend.StepRow) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.steps = append(tx.steps, txStep{l, row})
	return nil
}

type txFinish struct {
	f               backend.JobFinish
	deleteCompleted bool
}

// ErrTxDone is returned by a Tx used after its Commit or Rollback.
var ErrTxDone = errors.New("memory: transaction already committed or rolled back")

// Begin starts a transaction on b's store.
func (b *Backend) Begin() *Tx { return &Tx{s: b.s} }

// txOf returns the *Tx of a backend.Tx (nil for none), or ErrTxType.
func txOf(b *Backend, t backend.Tx) (*Tx, error) {
	if t == nil {
		return nil, nil
	}
	tx, ok := t.(*Tx)
	if !ok {
		return nil, fmt.Errorf("%w: %T (want *memory.Tx)", backend.ErrTxType, t)
	}
	if tx.s != b.s {
		return nil, fmt.Errorf("%w: a transaction of another memory store", backend.ErrTxType)
	}
	return tx, nil
}

func (tx *Tx) addInserts(rows []*backend.JobRow) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.inserts = append(tx.inserts, rows...)
	return nil
}

func (tx *Tx) addFinishes(fs []backend.JobFinish, deleteCompleted bool) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	for _, f := range fs {
		tx.finishes = append(tx.finishes, txFinish{f, deleteCompleted})
	}
	return nil
}

// Commit applies the transaction's inserts and completions at once.
func (tx *Tx) Commit(ctx context.Context) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.done = true
	t := now()
	s := tx.s
	s.mu.Lock()
	for _, tf := range tx.finishes {
		if _, ok := s.held(tf.f.Lease); !ok {
			s.mu.Unlock()
			return fmt.Errorf("commit: job %d: %w", tf.f.Lease.ID, ErrConflict)
		}
	}
	for _, ts := range tx.steps {
		if _, ok := s.held(ts.lease); !ok {
			s.mu.Unlock()
			return fmt.Errorf("commit: job %d: %w", ts.lease.ID, ErrConflict)
		}
	}
	for _, ts := range tx.steps {
		if err := s.applyStep(ts.row); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	var wakes []backend.Wake
	for _, tf := range tx.finishes {
		j, _ := s.held(tf.f.Lease)
		if w, ok := s.finish(j, tf.f, tf.deleteCompleted, t); ok {
			wakes = append(wakes, w)
		}
		if j.HasDependents {
			wakes = append(wakes, s.settle([]int64{j.ID}, t)...)
		}
	}
	for _, r := range tx.inserts {
		s.jobs[r.ID] = r
		delete(s.inOpenTx, r)
	}
	for _, fn := range tx.commits {
		fn(s)
	}
	wakes = append(wakes, runnable(tx.inserts, t)...)
	s.mu.Unlock()
	s.hub.Publish(wakes...)
	return nil
}

// Rollback drops the transaction's inserts and completions.
func (tx *Tx) Rollback(ctx context.Context) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return ErrTxDone
	}
	tx.done = true
	tx.s.mu.Lock()
	tx.s.forgetTxRows(tx.inserts)
	tx.s.mu.Unlock()
	tx.inserts, tx.finishes, tx.steps, tx.commits = nil, nil, nil, nil
	return nil
}

// forgetTxRows releases the unique keys of rows of a transaction that will
// never commit; s.mu is held.
func (s *store) forgetTxRows(rows []*backend.JobRow) {
	for _, r := range rows {
		delete(s.inOpenTx, r)
		if r.UniqueKey != "" && s.unique[r.UniqueKey] == r {
			delete(s.unique, r.UniqueKey)
		}
	}
}
