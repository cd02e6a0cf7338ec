package guard

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// TestAnswerToARecoveredAttemptIsKept: while this process waits for the
// server, another process recovers its call as unknown (here because a
// cleanup removed this owner's lock file, so it looked dead). The server's
// success must still be recorded, as a late answer, never dropped with
// "attempt already ended", and never reported as a journal failure.
func TestAnswerToARecoveredAttemptIsKept(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		lock := filepath.Join(h.path+".owners", h.j.Owner()+".lock")
		if err := os.Remove(lock); err != nil {
			t.Errorf("remove the owner's lock file: %v", err)
		}
		other, err := pending.Open(context.Background(), h.path, pending.Options{})
		if err != nil {
			t.Errorf("open the journal as another process would: %v", err)
			return okOutcome(map[string]any{"order_id": 1})
		}
		if len(other.Recovered()) != 1 {
			t.Errorf("the other opener should have recovered the live call, recovered %v", other.Recovered())
		}
		other.Close()
		return okOutcome(map[string]any{"order_id": 1})
	})
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil {
		t.Fatalf("the answer came; it must not be a journal error: %v", err)
	}
	c := h.get(res.Call.ID)
	if c.State != pending.StateSucceeded || res.State != pending.StateSucceeded || len(res.Result) == 0 {
		t.Fatalf("want the server's success kept: call %s, result state %s", c.State, res.State)
	}
	if a := c.Attempts[0]; !a.Late || a.Outcome != pending.OutcomeSucceeded || len(a.Result) == 0 {
		t.Fatalf("want the answer on the recovered attempt, as late: %+v", a)
	}
	if _, ok := hasEvent(events(t, h.path, c.ID), pending.EventLateResult); !ok {
		t.Errorf("want a late_result event")
	}
}
