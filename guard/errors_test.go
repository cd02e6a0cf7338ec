package guard

import (
	"errors"
	"strings"
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

// Errors that front-ends word say what is wrong, in their class, and name
// none of a front-end's commands or flags.
func TestErrorsLeaveWordingToFrontEnds(t *testing.T) {
	for _, c := range []struct {
		err   error
		class error
		text  string
	}{
		{&UnknownToolError{Tool: "nope"}, ErrBadInput, `bad input: the server has no tool "nope"`},
		{&NoQueryError{Tool: "create_order"}, ErrBadInput, "bad input: no query is configured for create_order"},
		{&SettledKeyError{CallID: 3, State: pending.StateFailed}, ErrNotAllowed, "not allowed: key already used by call 3, which failed"},
		{&SettledKeyError{CallID: 4, State: pending.StateApplied}, ErrNotAllowed,
			"not allowed: key already used by call 4, which is applied and settled; a new operation needs a new key"},
	} {
		if !errors.Is(c.err, c.class) || c.err.Error() != c.text || strings.Contains(c.text, "mcp-confirm") {
			t.Errorf("%T: %q (class %v), want %q in %v", c.err, c.err, errors.Is(c.err, c.class), c.text, c.class)
		}
	}
}
