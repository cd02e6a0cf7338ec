package tui

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The guard's errors are worded in the console's terms, never the CLI's.
func TestErrLineWordsGuardErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&guard.UnknownToolError{Tool: "nope"}, `the server has no tool "nope"`},
		{&guard.NoQueryError{Tool: "create_order"}, "no query is configured for create_order; pick a read tool in the query dialog, or set query_tool in the policy"},
		{&guard.SettledKeyError{CallID: 3, State: pending.StateFailed}, "key already used by call 3, which failed; retry call 3 (r on it), or use a new key"},
		{&guard.SettledKeyError{CallID: 4, State: pending.StateAbandoned}, "key already used by call 4, which is abandoned and settled; a new operation needs a new key"},
	} {
		if got := errLine(c.err); got != c.want {
			t.Errorf("errLine(%T) = %q, want %q", c.err, got, c.want)
		}
	}
}
