package pending

import (
	"context"
	"fmt"
	"testing"
)

func TestChangeFeed(t *testing.T) {
	ctx := context.Background()
	j := openTest(t, "")
	before, err := j.RecordIntent(ctx, intent("create_order", `{"n":0}`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := j.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := f.Next(ctx); err != nil || len(ch) != 0 {
		t.Fatalf("nothing changed yet: %v, %v", ch, err)
	}
	// The call from before the feed is lost; a new one appears and succeeds
	// between two looks (reported once, as new and succeeded).
	if err := j.RecordOutcome(ctx, before.ID, 1, Outcome{Event: EventLost, Reason: "idle timeout"}); err != nil {
		t.Fatal(err)
	}
	c2, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, c2.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	got := describe(t, f)
	want := []string{
		fmt.Sprintf("state %d in_flight->unknown", before.ID),
		fmt.Sprintf("state %d ->succeeded", c2.ID),
	}
	same(t, "first look", got, want)

	// A decision, and the state it moves the call to: decision first.
	if err := j.Decide(ctx, before.ID, DecisionInput{Action: ActionAbandon, Operator: "op", Note: "gone"}); err != nil {
		t.Fatal(err)
	}
	same(t, "abandon", describe(t, f), []string{
		fmt.Sprintf("decision %d abandon abandoned", before.ID),
		fmt.Sprintf("state %d unknown->abandoned", before.ID),
	})
	// A note on a settled call is a decision with no state change.
	if err := j.Decide(ctx, c2.ID, DecisionInput{Action: ActionNote, Operator: "op", Note: "fine"}); err != nil {
		t.Fatal(err)
	}
	same(t, "note", describe(t, f), []string{fmt.Sprintf("decision %d note succeeded", c2.ID)})
	same(t, "quiet", describe(t, f), nil)
}

func describe(t *testing.T, f *ChangeFeed) []string {
	t.Helper()
	ch, err := f.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range ch {
		if c.Type == ChangeDecision {
			out = append(out, fmt.Sprintf("decision %d %s %s", c.CallID, c.Action, c.State))
		} else {
			out = append(out, fmt.Sprintf("state %d %s->%s", c.CallID, c.From, c.State))
		}
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}
