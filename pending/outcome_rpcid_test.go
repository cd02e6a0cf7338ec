package pending

import (
	"context"
	"errors"
	"testing"
)

// The outcome can carry the attempt's rpc id (saving a RecordSent write);
// an empty one keeps whatever RecordSent stored.
func TestOutcomeRecordsRPCID(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	for _, tc := range []struct {
		sent, withOutcome, want string
	}{
		{"", "3 (session 2)", "3 (session 2)"},
		{"7", "", "7"},
		{"", "", ""},
	} {
		c, err := j.RecordIntent(ctx, intent("create_order", `{"sent":"`+tc.sent+`","out":"`+tc.withOutcome+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if tc.sent != "" {
			if err := j.RecordSent(ctx, c.ID, 1, tc.sent); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout", RPCID: tc.withOutcome}); err != nil {
			t.Fatal(err)
		}
		got, err := j.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.Attempts[0]; a.RPCID != tc.want || a.Outcome != OutcomeUnknown {
			t.Errorf("sent %q, outcome %q: attempt %+v, want rpc id %q", tc.sent, tc.withOutcome, a, tc.want)
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
