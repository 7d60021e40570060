package bench

import (
	"context"
	"testing"

	"github.com/spoolq/spool/backend"
	"github.com/spoolq/spool/backend/memory"
)

// capableStore is a memory store that declares the yes-or-no capabilities
// the engine asks about, with the answers given.
type capableStore struct {
	*memory.Backend
	stalls, steps bool
	settlers      int
}

func (s capableStore) CreditsStalls() bool      { return s.stalls }
func (s capableStore) WritesOutcomeSteps() bool { return s.steps }
func (s capableStore) SettleWriters() int       { return s.settlers }

// TestWrappersKeepCapabilities: every wrapper the benches put between the
// engine and a store answers the engine's capability questions as the
// store does, so that a bench measures the engine as production runs it.
func TestWrappersKeepCapabilities(t *testing.T) {
	for _, want := range []bool{true, false} {
		settlers := 0
		if want {
			settlers = 2
		}
		be := capableStore{Backend: memory.New(), stalls: want, steps: want, settlers: settlers}
		counted, _ := CountCompletions(be, 1)
		timer := &claimTimer{Backend: be, Capabilities: Capabilities{be}}
		wrappers := map[string]backend.Backend{
			"CountCompletions":         counted,
			"claimTimer":               timer,
			"KeepNotifier(claimTimer)": KeepNotifier(timer, notifyingStore{be}),
			"orderingCounter":          &orderingCounter{Backend: be, Capabilities: Capabilities{be}},
			"measuredCounter":          &measuredCounter{Backend: be, Capabilities: Capabilities{be}},
		}
		for name, w := range wrappers {
			sc, ok := w.(backend.StallCrediter)
			if !ok || sc.CreditsStalls() != want {
				t.Errorf("%s over a store crediting stalls %v: StallCrediter %v", name, want, ok && sc.CreditsStalls())
			}
			ow, ok := w.(backend.OutcomeStepWriter)
			if !ok || ow.WritesOutcomeSteps() != want {
				t.Errorf("%s over a store writing outcome steps %v: OutcomeStepWriter %v", name, want, ok && ow.WritesOutcomeSteps())
			}
			if sw, ok := w.(backend.SettleWriters); !ok || sw.SettleWriters() != settlers {
				t.Errorf("%s over a store of %d settle writers: SettleWriters %v", name, settlers, ok)
			}
		}
	}
}

// notifyingStore adds a Notifier to a capable store, for KeepNotifier.
type notifyingStore struct{ capableStore }

func (notifyingStore) Listen(ctx context.Context, ready func(), _ func(backend.Wake)) error {
	ready()
	<-ctx.Done()
	return ctx.Err()
}
