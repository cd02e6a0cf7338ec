package guard

import (
	"errors"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// A hold is one sentinel whichever layer reports it, so a front-end
// branches on it once.
func TestHoldsWrapTheOneSentinel(t *testing.T) {
	for _, err := range []error{
		&HeldError{CallID: 1, State: pending.StateUnknown},
		&LateSettledError{CallID: 1, State: pending.StateSucceeded},
		&KeyPendingError{CallID: 1, State: pending.StateInFlight},
		&pending.HeldError{CallID: 1},
		&pending.LateSettledError{CallID: 1, State: pending.StateSucceeded},
	} {
		if !errors.Is(err, ErrHeld) || !errors.Is(err, pending.ErrHeld) {
			t.Errorf("%T (%v) is not ErrHeld", err, err)
		}
	}
	for _, err := range []error{&KeyReuseError{CallID: 1}, &ServerMismatchError{CallID: 1}} {
		if errors.Is(err, ErrHeld) {
			t.Errorf("%T (%v) is ErrHeld", err, err)
		}
	}
}
