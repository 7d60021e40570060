package memory

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/backend"
)

// JobInsertMany implements backend.Backend. In a *Tx the jobs stay invisible
// until it commits; their ids are taken at once, as a sequence's would be.
func (b *Backend) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) (*backend.JobInsertManyResult, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	tx, err := txOf(b, p.Tx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	t := now()
	s := b.s
	s.mu.Lock()
	rows := make([]*backend.JobRow, 0, len(p.Jobs))
	ids := make([]int64, len(p.Jobs))
	var dups []bool
	for i, jp := range p.Jobs {
		if jp.UniqueKey != "" {
			if h, held := s.holder(jp.UniqueKey); held {
				if dups == nil {
					dups = make([]bool, len(p.Jobs))
				}
				ids[i], dups[i] = h.ID, true
				continue
			}
		}
		s.nextID++
		r := newRow(s.nextID, jp, t)
		rows, ids[i] = append(rows, r), r.ID
		if r.UniqueKey != "" {
			s.unique[r.UniqueKey] = r
			if tx != nil {
				// An open transaction's job holds its key, as an
				// uncommitted row holds a unique index entry.
				s.inOpenTx[r] = true
			}
		}
	}
	var wakes []backend.Wake
	if tx == nil {
		for _, r := range rows {
			s.jobs[r.ID] = r
		}
		wakes = runnable(rows, t) // before unlocking: a claim may take the rows at once
	}
	s.mu.Unlock()
	if tx != nil {
		if err := tx.addInserts(rows); err != nil {
			s.mu.Lock()
			s.forgetTxRows(rows)
			s.mu.Unlock()
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
	}
	s.hub.Publish(wakes...)
	res := &backend.JobInsertManyResult{Count: len(rows), Duplicates: dups}
	if !p.NoIDs || backend.AnyUnique(p.Jobs) {
		res.IDs = ids
	}
	return res, nil
}
