package pending

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	j, err := Open(ctx, testDB(t, ""), Options{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	mk := func(tool string, n int) int64 {
		t.Helper()
		c, err := j.RecordIntent(ctx, intent(tool, fmt.Sprintf(`{"n":%d}`, n)))
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	end := func(id int64, n int, ev Event) {
		t.Helper()
		if err := j.RecordOutcome(ctx, id, n, Outcome{Event: ev, Reason: "r", Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	decide := func(id int64, a Action) {
		t.Helper()
		if err := j.Decide(ctx, id, DecisionInput{Action: a, Operator: "op"}); err != nil {
			t.Fatal(err)
		}
	}
	old := mk("create_order", 0) // before the period
	end(old, 1, EventSucceeded)
	clock.t = clock.t.Add(time.Hour)
	since := clock.t

	ok := mk("create_order", 1)
	end(ok, 1, EventSucceeded)
	if err := j.RecordEvent(ctx, EventDedupeHit, ok, "replayed"); err != nil {
		t.Fatal(err)
	}
	marked := mk("create_order", 2)
	end(marked, 1, EventLost)
	clock.t = clock.t.Add(10 * time.Second)
	decide(marked, ActionQuery) // not a decision that settles: the clock runs on
	clock.t = clock.t.Add(50 * time.Second)
	decide(marked, ActionMark) // 60s after it became unknown
	retried := mk("create_order", 3)
	end(retried, 1, EventLost)
	clock.t = clock.t.Add(120 * time.Second)
	if _, _, err := j.Retry(ctx, retried, RetryInput{Operator: "op", Session: 1}); err != nil {
		t.Fatal(err)
	}
	end(retried, 2, EventSucceeded)
	open := mk("create_order", 4)
	end(open, 1, EventLost)
	failed := mk("refund", 5)
	end(failed, 1, EventFailed)

	rep, err := j.Report(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Tool != "create_order" || rep.Rows[1].Tool != "refund" {
		t.Fatalf("rows: %+v", rep.Rows)
	}
	r := rep.Rows[0]
	if r.Calls != 4 || r.Executed != 3 || r.Unknowns != 3 || r.Retries != 1 || r.Replays != 1 {
		t.Errorf("create_order: %+v", r)
	}
	if r.Outcomes[StateSucceeded] != 2 || r.Outcomes[StateApplied] != 1 || r.Outcomes[StateUnknown] != 1 {
		t.Errorf("outcomes: %v", r.Outcomes)
	}
	if r.Resolved[ResolvedMarked] != 1 || r.Resolved[ResolvedRetried] != 1 || r.Resolved[ResolvedOpen] != 1 || r.Resolved[ResolvedLate] != 0 {
		t.Errorf("resolved: %v", r.Resolved)
	}
	if d := r.TimeToDecide; d.Count != 2 || d.Median < 59 || d.Median > 61 || d.P90 < 119 || d.P90 > 121 {
		t.Errorf("time to decide: %+v, want 2 calls, 60s and 120s", d)
	}
	if tot := rep.Total; tot.Calls != 5 || tot.Executed != 3 || tot.Outcomes[StateFailed] != 1 {
		t.Errorf("total: %+v", tot)
	}
}
