package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// JobClaimFlow implements backend.Backend: claim runs under the store's
// lock, which is the flow lock; on an error the rows it took are put back.
func (b *Backend) JobClaimFlow(ctx context.Context, p *backend.JobClaimFlowParams, claim func(backend.FlowTx) error) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("claim jobs: %w", err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &flowTx{s: s, p: p, now: now(), saved: map[*backend.JobRow]backend.JobRow{}, rates: map[string]time.Time{}}
	if err := claim(tx); err != nil {
		for j, before := range tx.saved {
			*j = before
		}
		return err
	}
	for k, t := range tx.rates {
		s.rates[[2]string{p.Queue, k}] = t
	}
	return nil
}

// flowTx is a flow claim under the store's lock.
type flowTx struct {
	s     *store
	p     *backend.JobClaimFlowParams
	now   time.Time
	saved map[*backend.JobRow]backend.JobRow // rows taken, as they were
	rates map[string]time.Time
}

func (tx *flowTx) FlowRunning(ctx context.Context) (*backend.FlowRunning, error) {
	r := &backend.FlowRunning{Now: tx.now, Live: map[string]int{}, All: map[string]int{}}
	_, r.Paused = tx.s.paused[tx.p.Queue]
	for _, j := range tx.s.jobs {
		if j.Queue != tx.p.Queue || j.State != backend.StateRunning {
			continue
		}
		r.All[j.FlowKey]++
		if j.LeasedUntil.After(tx.now) {
			r.Live[j.FlowKey]++
		}
	}
	return r, nil
}

func (tx *flowTx) FlowKeys(ctx context.Context, after string, limit int) ([]string, error) {
	seen := map[string]bool{}
	for _, j := range tx.s.jobs {
		if j.Queue == tx.p.Queue && pending(j.State) && j.FlowKey > after {
			seen[j.FlowKey] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[:min(len(keys), limit)], nil
}

func (tx *flowTx) FlowRates(ctx context.Context, keys []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, k := range keys {
		if t, ok := tx.rates[k]; ok {
			out[k] = t
		} else if t, ok := tx.s.rates[[2]string{tx.p.Queue, k}]; ok {
			out[k] = t
		}
	}
	return out, nil
}

func (tx *flowTx) FlowSaveRates(ctx context.Context, tats map[string]time.Time) error {
	for k, t := range tats {
		tx.rates[k] = t
	}
	return nil
}

func (tx *flowTx) FlowTake(ctx context.Context, takes []backend.FlowTake, final bool) ([]*backend.JobRow, error) {
	if _, paused := tx.s.paused[tx.p.Queue]; paused {
		return nil, nil
	}
	var out []*backend.JobRow
	for _, t := range takes {
		var cand []*backend.JobRow
		for _, j := range tx.s.jobs {
			if j.Queue == tx.p.Queue && pending(j.State) && (t.Any || t.Window > 0 || j.FlowKey == t.Key) {
				cand = append(cand, j)
			}
		}
		order := backend.ClaimOrder
		if !t.Any && t.Key != "" && t.Order != backend.FlowOrderNone {
			order = func(a, b *backend.JobRow) int { return cmp.Compare(a.ID, b.ID) }
		}
		slices.SortFunc(cand, order)
		keyless := !t.Any && t.Key == ""
		block := !t.Any && t.Key != "" && t.Order == backend.FlowOrderBlock
		var picked []*backend.JobRow
		for i, j := range cand {
			if len(picked) >= t.Max || keyless && i >= t.Window {
				break
			}
			if keyless && j.FlowKey != "" {
				continue
			}
			if !j.RunAt.After(tx.now) {
				picked = append(picked, j)
			}
			if block {
				break // only the key's oldest pending job may run
			}
		}
		for _, j := range picked {
			if _, ok := tx.saved[j]; !ok {
				tx.saved[j] = *j
			}
			markClaimed(j, tx.now, tx.p.Lease, tx.p.ClaimID)
			out = append(out, copyRow(j))
		}
	}
	return out, nil
}

// QueueFlowUse implements backend.Backend.
func (b *Backend) QueueFlowUse(ctx context.Context, p *backend.QueueFlowUseParams) ([]backend.FlowKeyUse, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("queue flow use: %w", err)
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now()
	use := backend.FlowUses{}
	for _, j := range s.jobs {
		if j.Queue != p.Queue {
			continue
		}
		switch {
		case j.State == backend.StateRunning && j.LeasedUntil.After(t):
			use.Add(j.FlowKey, 1, 0)
		case j.State == backend.StateRunning:
			use.Add(j.FlowKey, 0, 0) // listed, as the SQL stores list it
		case pending(j.State):
			use.Add(j.FlowKey, 0, 1)
		}
	}
	for k, tat := range s.rates {
		if k[0] == p.Queue && tat.After(t) {
			use.SetRate(k[1], tat)
		}
	}
	return use.Sorted(p.Limit), nil
}

// pruneRates drops rate states whose time is before cutoff: a past time
// means the same as no state.
func (s *store) pruneRates(cutoff time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, tat := range s.rates {
		if tat.Before(cutoff) {
			delete(s.rates, k)
		}
	}
}
