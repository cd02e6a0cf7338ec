package pending

import (
	"context"
	"errors"
	"testing"
)

// The outcome carries where the attempt's request went: its rpc id, and
// the session it really went out on, which replaces the intent's when the
// server was restarted in between (0 keeps the intent's).
func TestOutcomeRecordsWhereItWent(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	for _, tc := range []struct {
		rpcID         string
		session, want int
	}{
		{"3", 2, 2},
		{"7", 0, 1},
		{"", 0, 1},
	} {
		in := intent("create_order", `{"rpc":"`+tc.rpcID+`","session":`+string(rune('0'+tc.session))+`}`)
		c, err := j.RecordIntent(ctx, in) // the intent names session 1
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", RPCID: tc.rpcID, Session: tc.session}); err != nil {
			t.Fatal(err)
		}
		got, err := j.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.Attempts[0]; a.RPCID != tc.rpcID || a.Session != tc.want || a.Outcome != OutcomeUnknown {
			t.Errorf("outcome rpc %q session %d: attempt %+v, want rpc id %q session %d", tc.rpcID, tc.session, a, tc.rpcID, tc.want)
		}
	}
}

// The resend hold still finds open calls through the partial index of
// migration 2, and ignores settled ones.
func TestHoldWithPartialIndex(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	in := intent("refresh", `{}`)
	in.Hold = true
	for i := range 3 {
		in.Key = "settled-key-" + string(rune('a'+i)) + "-000000"
		c, err := j.RecordIntent(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	in.Key = "open-key-000000000000"
	open, err := j.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	in.Key = "held-key-000000000000"
	_, err = j.RecordIntent(ctx, in)
	var held *HeldError
	if !errors.As(err, &held) || held.CallID != open.ID {
		t.Fatalf("identical intent while %d is in flight: %v", open.ID, err)
	}
	if err := j.RecordOutcome(ctx, open.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout"}); err != nil {
		t.Fatal(err)
	}
	if _, err = j.RecordIntent(ctx, in); !errors.As(err, &held) || held.CallID != open.ID {
		t.Fatalf("identical intent while %d is unknown: %v", open.ID, err)
	}
	if err := j.Decide(ctx, open.ID, DecisionInput{Action: ActionAbandon, Operator: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err = j.RecordIntent(ctx, in); err != nil {
		t.Fatalf("identical intent after the open call was abandoned: %v", err)
	}
}
