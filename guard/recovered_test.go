package guard

import (
	"context"
	"database/sql"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// TestAnswerToARecoveredAttemptIsKept: while this process waits for the
// server, another process recovers its call as unknown, as it would if
// this owner looked dead to it. The server's success must still be
// recorded, as a late answer, never dropped with "attempt already ended",
// and never reported as a journal failure.
//
// A live owner no longer looks dead when a cleanup removes its lock file
// (issue 44: it also holds a lock on the journal itself), so the call is
// handed, in the file, to an owner id that no process holds, as a dead
// process leaves it; the other process's real recovery does the rest.
func TestAnswerToARecoveredAttemptIsKept(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", func(fakeCall) mcpclient.Delivery {
		db, err := sql.Open("sqlite", h.path)
		if err != nil {
			t.Errorf("open the journal file: %v", err)
			return okOutcome(map[string]any{"order_id": 1})
		}
		if _, err := db.Exec("UPDATE calls SET owner = '01DEADDEADDEADDEADDEADDEAD' WHERE owner = ?", h.j.Owner()); err != nil {
			t.Errorf("hand the call to a dead owner: %v", err)
		}
		db.Close()
		other, err := pending.Open(context.Background(), h.path, pending.Options{})
		if err != nil {
			t.Errorf("open the journal as another process would: %v", err)
			return okOutcome(map[string]any{"order_id": 1})
		}
		if len(other.Recovered()) != 1 {
			t.Errorf("the other opener should have recovered the call, recovered %v", other.Recovered())
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
