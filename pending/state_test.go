package pending

import (
	"errors"
	"testing"
)

// The whole table of SPEC §3, written out independently of the map in
// state.go: every (state, event) pair, allowed or refused.
func TestTransitionTable(t *testing.T) {
	firstRunOnly(t)
	allowed := map[[2]string]State{
		{"in_flight", "succeeded"}: StateSucceeded,
		{"in_flight", "failed"}:    StateFailed,
		{"in_flight", "lost"}:      StateUnknown,
		{"failed", "retry"}:        StateInFlight,
		{"unknown", "retry"}:       StateInFlight,
		{"unknown", "mark"}:        StateApplied,
		{"unknown", "abandon"}:     StateAbandoned,
		{"unknown", "succeeded"}:   StateSucceeded, // late result
		{"unknown", "failed"}:      StateFailed,    // late result
	}
	events := []Event{EventSucceeded, EventFailed, EventLost, EventRetry, EventMark, EventAbandon}
	for _, from := range States {
		for _, ev := range events {
			to, err := Transition(from, ev)
			want, ok := allowed[[2]string{string(from), string(ev)}]
			if ok {
				if err != nil || to != want {
					t.Errorf("%s --%s--> got (%s, %v), want %s", from, ev, to, err, want)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) || !errors.Is(err, ErrIllegalTransition) || to != from {
				t.Errorf("%s --%s--> got (%s, %v), want refusal", from, ev, to, err)
			}
		}
	}
}

func TestMoreCautious(t *testing.T) {
	firstRunOnly(t)
	cases := []struct {
		stored, fresh Kind
		want          Kind
	}{
		{KindWrite, KindRead, KindWrite},
		{KindRead, KindWrite, KindWrite},
		{KindRead, KindRead, KindRead},
		{KindWrite, KindWrite, KindWrite},
	}
	for _, c := range cases {
		if got, _ := MoreCautious(c.stored, KindFromPolicy, c.fresh, KindFromAnnotation); got != c.want {
			t.Errorf("MoreCautious(%s, %s) = %s, want %s", c.stored, c.fresh, got, c.want)
		}
	}
}

// FuzzTransition drives the state machine with arbitrary event sequences
// and checks its invariants: every state reached is valid, a refusal leaves
// the state unchanged, terminal states never change, and retry only ever
// leads back to in_flight.
func FuzzTransition(f *testing.F) {
	f.Add([]byte{0, 2, 3, 2, 5})
	f.Add([]byte{1, 3, 0})
	f.Add([]byte{2, 4, 5, 3})
	events := []Event{EventSucceeded, EventFailed, EventLost, EventRetry, EventMark, EventAbandon, "bogus"}
	f.Fuzz(func(t *testing.T, seq []byte) {
		s := StateInFlight
		for _, b := range seq {
			ev := events[int(b)%len(events)]
			to, err := Transition(s, ev)
			if !to.Valid() {
				t.Fatalf("%s --%s--> invalid state %q", s, ev, to)
			}
			if err != nil {
				if to != s {
					t.Fatalf("refused %s --%s--> changed state to %s", s, ev, to)
				}
				continue
			}
			if s.Terminal() {
				t.Fatalf("terminal %s left by %s", s, ev)
			}
			if ev == EventRetry && to != StateInFlight {
				t.Fatalf("retry led to %s", to)
			}
			s = to
		}
	})
}

// Allows agrees with Transition for every state and event.
func TestAllowsAgreesWithTransition(t *testing.T) {
	firstRunOnly(t)
	for _, s := range States {
		for _, ev := range []Event{EventSucceeded, EventFailed, EventLost, EventRetry, EventMark, EventAbandon} {
			_, err := Transition(s, ev)
			if got, want := s.Allows(ev), err == nil; got != want {
				t.Errorf("%s.Allows(%s) = %v, Transition says %v", s, ev, got, want)
			}
		}
	}
	if !StateUnknown.Allows(EventRetry) || !StateFailed.Allows(EventRetry) || StateSucceeded.Allows(EventRetry) || StateFailed.Allows(EventAbandon) {
		t.Error("Allows does not say SPEC §3's retry and abandon rules")
	}
}
