package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

const aliceOrder = `{"item":"widget","quantity":2,"buyer":"alice"}`

// TestE2ELostResponseStory is the article's story from the command line:
// the server commits the order and its answer is lost; the client says
// "unknown" and does not resend; the user's resend is held; the operator
// queries, sees the order, retries with the same key and gets the stored
// result. At the end the server holds one order and alice paid once.
func TestE2ELostResponseStory(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	before := budgetOf(t, db, "alice")

	// 1. The response is lost: the order commits, the answer never comes.
	r := w.call(aliceOrder, []string{"--timeout", "2s"}, "--hang-after-commit", "1")
	wantExit(t, r, exitUnknown, "call with a lost response")
	out := parseCallOut(t, r)
	if out.ID == 0 || out.State != "unknown" || out.Key == "" {
		t.Fatalf("call output: want an id, state unknown and a key, got %+v", out)
	}
	if !strings.Contains(r.stderr, "unknown") || !strings.Contains(r.stderr, "NOT resent") {
		t.Errorf("stderr should say the outcome is unknown and nothing was resent:\n%s", r.stderr)
	}
	calls := w.list()
	if len(calls) != 1 || calls[0].ID != out.ID || calls[0].State != "unknown" || calls[0].Key != out.Key {
		t.Fatalf("list --json after the lost response: want one unknown call %d, got %+v", out.ID, calls)
	}
	if calls[0].Reason != "idle timeout" || calls[0].Kind != "write" || calls[0].Tool != "create_order" {
		t.Errorf("list --json: reason %q kind %q tool %q", calls[0].Reason, calls[0].Kind, calls[0].Tool)
	}
	if n := ordersFor(t, db, out.Key); n != 1 {
		t.Fatalf("the server committed before the answer was lost: want 1 order for key %s, got %d", out.Key, n)
	}
	if got := w.sent("create_order"); got[out.Key] != 1 || len(got) != 1 {
		t.Fatalf("want exactly one create_order sent, with the call's key; wire log has %v", got)
	}

	// 2. The user presses "send" again: held, nothing sent.
	r = w.call(aliceOrder, []string{"--timeout", "2s"}, "--hang-after-commit", "1")
	wantExit(t, r, exitHeld, "identical resend")
	if held := parseCallOut(t, r); !held.Held || held.HeldBy != out.ID || held.ID != out.ID || held.State != "unknown" {
		t.Errorf("held resend's stdout: want call %d's record with \"held\": true, \"held_by\": %d, got %+v", out.ID, out.ID, held)
	}
	stderrLines(t, r, "held resend")
	if !strings.Contains(r.stderr, "held") || !strings.Contains(r.stderr, strconv.FormatInt(out.ID, 10)) {
		t.Errorf("stderr should say the resend is held by call %d:\n%s", out.ID, r.stderr)
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("the held resend was sent: %d create_order requests on the wire", n)
	}
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("after the held resend the demo DB has %d orders, want 1", n)
	}
	if calls := w.list(); len(calls) != 1 {
		t.Fatalf("the held resend added a journal row: %d calls", len(calls))
	}

	// 3. The operator queries: evidence stored, state unchanged.
	id := strconv.FormatInt(out.ID, 10)
	// As the hint says, with no server: the call's own server is used.
	r = w.run("query", id, "--tool", "find_orders", "--args", `{"idempotency_key":"{key}"}`)
	wantExit(t, r, exitOK, "query")
	if qo := parseCallOut(t, r); qo.ID != out.ID || qo.State != "unknown" || len(structuredOf(t, qo.Result)["orders"].([]any)) != 1 {
		t.Fatalf("query output: want call %d still unknown, with the find_orders result; got %s", out.ID, r.stdout)
	}
	c := w.show(out.ID)
	if c.State != "unknown" {
		t.Fatalf("query changed the state to %s; it must leave it unknown", c.State)
	}
	if len(c.Decisions) != 1 || c.Decisions[0].Action != "query" || c.Decisions[0].Operator == "" || c.Decisions[0].At.IsZero() {
		t.Fatalf("want one query decision with operator and time, got %+v", c.Decisions)
	}
	var ev struct {
		Tool   string          `json:"tool"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(c.Decisions[0].Evidence, &ev); err != nil {
		t.Fatalf("query evidence: %v: %s", err, c.Decisions[0].Evidence)
	}
	orders, _ := structuredOf(t, ev.Result)["orders"].([]any)
	if ev.Tool != "find_orders" || len(orders) != 1 {
		t.Fatalf("query evidence should be find_orders finding the one order, got %s", c.Decisions[0].Evidence)
	}
	if o, _ := orders[0].(map[string]any); o["idempotency_key"] != out.Key {
		t.Errorf("the order found has key %v, want %s", o["idempotency_key"], out.Key)
	}
	if c.Proposal == "" {
		t.Errorf("a query that found the order should propose a resolution")
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("the query sent the write: %d create_order requests on the wire", n)
	}

	// 4. Retry with the same key: the server replays its stored result.
	r = w.run("retry", id)
	wantExit(t, r, exitOK, "retry")
	ro := parseCallOut(t, r)
	if ro.State != "succeeded" || !ro.Replayed || ro.Key != out.Key || !replayedMeta(t, ro.Result) {
		t.Fatalf("retry: want succeeded, replayed, same key %s; got %+v", out.Key, ro)
	}
	c = w.show(out.ID)
	if c.State != "succeeded" || len(c.Attempts) != 2 {
		t.Fatalf("after retry: want succeeded with 2 attempts, got %s with %d", c.State, len(c.Attempts))
	}
	if a := c.Attempts[0]; a.N != 1 || a.Outcome != "unknown" || a.Clock != "idle" {
		t.Errorf("attempt 1: want unknown by the idle clock, got %+v", a)
	}
	if a := c.Attempts[1]; a.N != 2 || a.Outcome != "succeeded" || !replayedMeta(t, a.Result) {
		t.Errorf("attempt 2: want a succeeded, replayed result, got %+v", a)
	}
	if len(c.Decisions) != 2 || c.Decisions[1].Action != "retry" || c.Decisions[1].Attempt != 2 {
		t.Errorf("decisions: want query then retry (attempt 2), got %+v", c.Decisions)
	}
	if got := w.sent("create_order"); got[out.Key] != 2 || len(got) != 1 {
		t.Fatalf("want two sends of the one key (the original and the retry), wire log has %v", got)
	}

	// 5. The business system: one order, one budget deduction.
	if n := ordersFor(t, db, out.Key); n != 1 {
		t.Fatalf("want exactly 1 order for key %s, got %d", out.Key, n)
	}
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("want 1 order in the demo DB, got %d", n)
	}
	if after := budgetOf(t, db, "alice"); after != before-2*25 {
		t.Fatalf("alice's budget: %d before, %d after; want exactly one deduction of 50", before, after)
	}
	if left, _ := structuredOf(t, ro.Result)["budget_left"].(float64); int(left) != before-50 {
		t.Errorf("the replayed result says budget_left %v, want %d", left, before-50)
	}
	for _, a := range c.Attempts {
		if a.EndedAt == nil || a.EndedAt.Before(a.SentAt) || time.Since(a.SentAt) > time.Hour {
			t.Errorf("attempt %d times: sent %v ended %v", a.N, a.SentAt, a.EndedAt)
		}
	}
}
