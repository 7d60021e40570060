package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/backend"
)

// PeriodicRecord implements backend.Backend.
func (b *Backend) PeriodicRecord(ctx context.Context, p *backend.PeriodicRecordParams) ([]backend.PeriodicJob, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("record periodic jobs: %w", err)
	}
	t := now()
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	out := make([]backend.PeriodicJob, 0, len(p.Jobs))
	for _, j := range p.Jobs {
		j.Since, j.LastSlot, j.NextSlot, j.StartedAt = micro(j.Since), micro(j.LastSlot), micro(j.NextSlot), micro(j.StartedAt)
		stored, ok := b.s.periodic[j.Name]
		if !ok {
			stored = j
		} else {
			stored.Schedule, stored.Queue, stored.NextSlot = j.Schedule, j.Queue, j.NextSlot
			if j.LastSlot.After(stored.LastSlot) {
				stored.LastSlot = j.LastSlot
			}
			if !j.StartedAt.IsZero() && (stored.StartedAt.IsZero() || stored.StartedAt.Before(p.StartAfter)) {
				stored.StartedAt = j.StartedAt
			}
		}
		stored.SeenAt = t
		b.s.periodic[j.Name] = stored
		out = append(out, stored)
	}
	return out, nil
}

// PeriodicList implements backend.Backend.
func (b *Backend) PeriodicList(ctx context.Context) ([]backend.PeriodicJob, error) {
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	b.s.mu.Lock()
	out := make([]backend.PeriodicJob, 0, len(b.s.periodic))
	for _, j := range b.s.periodic {
		out = append(out, j)
	}
	b.s.mu.Unlock()
	slices.SortFunc(out, func(a, c backend.PeriodicJob) int { return cmp.Compare(a.Name, c.Name) })
	return out, nil
}

// micro is t in UTC to the microsecond, as the SQL backends store times;
// the zero time stays zero.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
