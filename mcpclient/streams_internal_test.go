package mcpclient

import (
	"context"
	"testing"
)

// A call that ended with an answer the client library saw and mcp-confirm
// did not, with no cancel of any kind, is not "cancelled" (issue 44): only
// the caller's own cancel says so.
func TestUnknownReasonNeverCancelledUncancelled(t *testing.T) {
	callCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if r, err := unknownReason(nil, context.Background(), callCtx, false); r == ReasonCancelled {
		t.Fatalf("reason %q (%v) for a call nobody cancelled", r, err)
	}
	parent, stop := context.WithCancel(context.Background())
	stop()
	if r, _ := unknownReason(nil, parent, callCtx, false); r != ReasonCancelled {
		t.Fatalf("reason %q for a call its caller cancelled, want %q", r, ReasonCancelled)
	}
}
