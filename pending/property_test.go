package pending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestPropertyConcurrentOperations runs random operations from several
// goroutines against one journal and checks the invariants after every
// round: one key per call, attempts numbered 1..n without gaps, at most one
// open attempt and only on an in_flight call, terminal states stay
// terminal, decisions only grow (the old log is a prefix of the new one).
func TestPropertyConcurrentOperations(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	const workers, opsPerWorker, rounds = 4, 30, 3
	terminal := map[int64]State{}
	decisions := map[int64][]Decision{}
	for round := range rounds {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(round)))
				for i := range opsPerWorker {
					randomOp(ctx, t, j, rng, fmt.Sprintf("r%d-w%d-%d", round, seed, i))
				}
			}(uint64(w))
		}
		wg.Wait()
		checkInvariants(ctx, t, j, terminal, decisions)
	}
}

func randomOp(ctx context.Context, t *testing.T, j *Journal, rng *rand.Rand, tag string) {
	calls, err := j.List(ctx, Filter{})
	if err != nil {
		t.Error(err)
		return
	}
	pick := func() int64 {
		if len(calls) == 0 {
			return 1
		}
		return calls[rng.IntN(len(calls))].ID
	}
	var opErr error
	switch rng.IntN(8) {
	case 0, 1:
		in := intent("create_order", fmt.Sprintf(`{"n":%d}`, rng.IntN(5)))
		in.Key = "k-" + tag
		in.Hold = rng.IntN(2) == 0
		_, opErr = j.RecordIntent(ctx, in)
	case 2:
		id := pick()
		c, err := j.Get(ctx, id)
		if err != nil {
			return
		}
		ev := []Event{EventSucceeded, EventFailed, EventLost}[rng.IntN(3)]
		opErr = j.RecordOutcome(ctx, id, len(c.Attempts), Outcome{Event: ev, Reason: "random"})
	case 3:
		_, _, opErr = j.Retry(ctx, pick(), RetryInput{Operator: "prop", Session: 1})
	case 4:
		opErr = j.Decide(ctx, pick(), DecisionInput{Action: ActionAbandon, Operator: "prop"})
	case 5:
		opErr = j.Decide(ctx, pick(), DecisionInput{Action: ActionMark, Operator: "prop"})
	case 6:
		opErr = j.Decide(ctx, pick(), DecisionInput{Action: ActionNote, Operator: "prop", Note: tag})
	case 7:
		id := pick()
		c, err := j.Get(ctx, id)
		if err != nil {
			return
		}
		opErr = j.RecordLateResult(ctx, id, 1+rng.IntN(len(c.Attempts)), Outcome{Event: EventSucceeded, Result: json.RawMessage(`{}`)})
	}
	// Refusals are expected; anything else is a bug.
	if opErr != nil && !errors.Is(opErr, ErrIllegalTransition) && !errors.Is(opErr, ErrHeld) &&
		!errors.Is(opErr, ErrKeyExists) && !errors.Is(opErr, ErrAttemptEnded) && !errors.Is(opErr, ErrNoSuchCall) {
		t.Errorf("unexpected error: %v", opErr)
	}
}

func checkInvariants(ctx context.Context, t *testing.T, j *Journal, terminal map[int64]State, decisions map[int64][]Decision) {
	t.Helper()
	calls, err := j.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int64{}
	counts := map[State]int{}
	for _, summary := range calls {
		c, err := j.Get(ctx, summary.ID)
		if err != nil {
			t.Fatal(err)
		}
		counts[c.State]++
		if other, dup := keys[c.Key]; dup {
			t.Errorf("key %s on calls %d and %d", c.Key, other, c.ID)
		}
		keys[c.Key] = c.ID
		open := 0
		for i, a := range c.Attempts {
			if a.N != i+1 {
				t.Errorf("call %d: attempt %d at position %d", c.ID, a.N, i+1)
			}
			if a.Outcome == OutcomePending {
				open++
				if i != len(c.Attempts)-1 {
					t.Errorf("call %d: open attempt %d is not the last", c.ID, a.N)
				}
			}
		}
		if (c.State == StateInFlight) != (open == 1) || open > 1 {
			t.Errorf("call %d is %s with %d open attempts", c.ID, c.State, open)
		}
		if was, ok := terminal[c.ID]; ok && was != c.State {
			t.Errorf("call %d left terminal state %s for %s", c.ID, was, c.State)
		}
		if c.State.Terminal() {
			terminal[c.ID] = c.State
		}
		old := decisions[c.ID]
		if len(c.Decisions) < len(old) {
			t.Errorf("call %d: decisions shrank from %d to %d", c.ID, len(old), len(c.Decisions))
		}
		for i := range old {
			if i < len(c.Decisions) && (old[i].ID != c.Decisions[i].ID || old[i].Action != c.Decisions[i].Action) {
				t.Errorf("call %d: decision %d changed", c.ID, i)
			}
		}
		decisions[c.ID] = c.Decisions
	}
	got, err := j.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range States {
		if got[s] != counts[s] {
			t.Errorf("state_counts[%s] = %d, counted %d", s, got[s], counts[s])
		}
	}
}
