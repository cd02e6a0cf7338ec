package pending

import (
	"errors"
	"fmt"
)

// State is where a call stands. The strings are part of the JSON contract
// (SPEC §3) and are stored verbatim in the journal.
type State string

const (
	StateInFlight  State = "in_flight" // intent durable; request sent or about to be
	StateSucceeded State = "succeeded" // the server answered with a result, isError false
	StateFailed    State = "failed"    // the server answered with a failure
	StateUnknown   State = "unknown"   // sent, no answer: the write may or may not have happened
	StateApplied   State = "applied"   // an operator confirmed it took effect
	StateAbandoned State = "abandoned" // an operator gave up on it; nothing more is sent
)

// States lists every state in the order the console shows them.
var States = []State{StateUnknown, StateInFlight, StateFailed, StateSucceeded, StateApplied, StateAbandoned}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case StateInFlight, StateSucceeded, StateFailed, StateUnknown, StateApplied, StateAbandoned:
		return true
	}
	return false
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateApplied || s == StateAbandoned
}

// Event is what happens to a call; Transition maps (state, event) to the
// next state. Queries and notes are not events: they never change state.
type Event string

const (
	EventSucceeded Event = "succeeded" // a result with isError false arrived
	EventFailed    Event = "failed"    // a result with isError true, or a JSON-RPC error to a request not cancelled
	EventLost      Event = "lost"      // timeout, cancellation, connection lost, crash recovery
	EventRetry     Event = "retry"     // operator: resend with the same key
	EventMark      Event = "mark"      // operator: it took effect
	EventAbandon   Event = "abandon"   // operator: give up
)

// ErrIllegalTransition is wrapped by every *TransitionError.
var ErrIllegalTransition = errors.New("transition not allowed")

// TransitionError says which event was refused in which state.
type TransitionError struct {
	From  State
	Event Event
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s a call that is %s", e.Event, e.From)
}

func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// EventCompensate names, in a refusal, the operator's decision to have a
// call undone: no transition of its own (the call keeps its state; the
// call that undoes it has its own).
const EventCompensate Event = "compensate"

// Compensable reports whether a call in state s may be undone by another
// (ActionCompensate): one that took effect or may have (succeeded,
// applied, unknown, abandoned); not one in flight (its outcome is coming)
// nor one that failed (the server said it did nothing).
func Compensable(s State) bool {
	switch s {
	case StateSucceeded, StateApplied, StateUnknown, StateAbandoned:
		return true
	}
	return false
}

// transitions is the state machine of SPEC §3, in one place. A late result
// (EventSucceeded/EventFailed on an unknown call) is a legal transition; a
// late result on an applied or abandoned call is not, and is recorded as a
// conflict instead (see RecordLateResult).
var transitions = map[State]map[Event]State{
	StateInFlight: {EventSucceeded: StateSucceeded, EventFailed: StateFailed, EventLost: StateUnknown},
	StateFailed:   {EventRetry: StateInFlight},
	StateUnknown: {
		EventRetry: StateInFlight, EventMark: StateApplied, EventAbandon: StateAbandoned,
		EventSucceeded: StateSucceeded, EventFailed: StateFailed,
	},
}

// Allows reports whether ev may happen to a call in state s: the console
// enables its keys, and the guard its decisions, by this (read from the
// same table as Transition), never by a list of states of their own.
func (s State) Allows(ev Event) bool {
	_, ok := transitions[s][ev]
	return ok
}

// Transition returns the state after ev, or a *TransitionError. It is a
// pure function: the journal calls it inside the transaction that writes
// the new state, so nothing changes when it refuses.
func Transition(from State, ev Event) (State, error) {
	if to, ok := transitions[from][ev]; ok {
		return to, nil
	}
	return from, &TransitionError{From: from, Event: ev}
}

// Kind says whether a tool changes its environment.
type Kind string

const (
	KindRead  Kind = "read"
	KindWrite Kind = "write"
)

// KindSource says who decided the kind: the operator's policy, the server's
// (untrusted) annotation, or the safe default (write).
type KindSource string

const (
	KindFromPolicy     KindSource = "policy"
	KindFromAnnotation KindSource = "annotation"
	KindFromDefault    KindSource = "default"
)

// MoreCautious merges a stored classification with a fresh one: a write
// anywhere wins, so a server flipping readOnlyHint between tools/list calls
// gains nothing (SPEC §3).
func MoreCautious(stored Kind, storedSrc KindSource, fresh Kind, freshSrc KindSource) (Kind, KindSource) {
	if stored == KindWrite {
		return stored, storedSrc
	}
	if fresh == KindWrite {
		return fresh, freshSrc
	}
	return stored, storedSrc
}
