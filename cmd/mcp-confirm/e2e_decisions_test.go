package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestE2EDefiniteFailureAndDecisions: a definite failure is "failed" (exit
// 1, nothing ordered) and can be retried; abandon and mark applied record
// the operator, time and note; a decision the state machine does not allow
// is exit 2 and changes nothing.
func TestE2EDefiniteFailureAndDecisions(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()

	// A definite failure: the server answered, nothing was committed.
	r := w.call(`{"item":"gadget","quantity":1,"buyer":"bob"}`, nil, "--fail-rate", "1")
	wantExit(t, r, exitFailed, "call with --fail-rate 1")
	failed := parseCallOut(t, r)
	if failed.State != "failed" || len(failed.Result) == 0 {
		t.Fatalf("want state failed with the server's error result, got %+v", failed)
	}
	if c := w.show(failed.ID); c.State != "failed" || len(c.Attempts) != 1 || c.Attempts[0].Outcome != "failed" {
		t.Fatalf("show: want failed with one failed attempt, got %s %+v", c.State, c.Attempts)
	}
	if n := totalOrders(t, db); n != 0 {
		t.Fatalf("a failure before commit left %d orders", n)
	}
	// Neither abandon nor mark applies to a failed call (SPEC §3: failed
	// leads only to a retry).
	for _, dec := range [][]string{{"abandon", "--note", "x"}, {"mark", "applied", "--note", "x"}} {
		args := append([]string{dec[0], strconv.FormatInt(failed.ID, 10)}, dec[1:]...)
		r := w.run(args...)
		wantExit(t, r, exitBadInput, dec[0]+" of a failed call")
		stderrLines(t, r, dec[0]+" of a failed call")
	}

	// Two lost responses, for abandon and mark applied.
	lostA := parseCallOut(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, []string{"--timeout", "2s"}, "--hang-after-commit", "1"))
	lostB := parseCallOut(t, w.call(`{"item":"widget","quantity":3,"buyer":"alice"}`, []string{"--timeout", "2s"}, "--hang-after-commit", "1"))
	if lostA.State != "unknown" || lostB.State != "unknown" {
		t.Fatalf("want two unknown calls, got %+v and %+v", lostA, lostB)
	}
	r = w.run("abandon", strconv.FormatInt(lostA.ID, 10), "--note", "refunded by hand, ticket 42")
	wantExit(t, r, exitOK, "abandon")
	r = w.run("mark", strconv.FormatInt(lostB.ID, 10), "applied", "--note", "seen in the orders report")
	wantExit(t, r, exitOK, "mark applied")
	for _, want := range []struct {
		id            int64
		state, action string
		note          string
	}{
		{lostA.ID, "abandoned", "abandon", "refunded by hand, ticket 42"},
		{lostB.ID, "applied", "mark", "seen in the orders report"},
	} {
		c := w.show(want.id)
		if c.State != want.state {
			t.Errorf("call %d: want %s, got %s", want.id, want.state, c.State)
		}
		if len(c.Decisions) != 1 {
			t.Fatalf("call %d: want one decision, got %+v", want.id, c.Decisions)
		}
		d := c.Decisions[0]
		if d.Action != want.action || d.Note != want.note || d.Operator == "" || d.At.IsZero() || d.At.Location().String() != "UTC" {
			t.Errorf("call %d: want decision %s by an operator, at a UTC time, with note %q; got %+v", want.id, want.action, want.note, d)
		}
	}
	// Terminal states: no further decision, nothing changes.
	r = w.run("abandon", strconv.FormatInt(lostB.ID, 10))
	wantExit(t, r, exitBadInput, "abandon of an applied call")
	if c := w.show(lostB.ID); c.State != "applied" || len(c.Decisions) != 1 {
		t.Errorf("a refused abandon changed call %d: %s, %d decisions", lostB.ID, c.State, len(c.Decisions))
	}

	// The failed call retried against a healthy server succeeds.
	r = w.run(append([]string{"retry", strconv.FormatInt(failed.ID, 10), "--any-server"}, w.server()...)...)
	wantExit(t, r, exitOK, "retry of a failed call")
	if ro := parseCallOut(t, r); ro.State != "succeeded" || ro.Key != failed.Key {
		t.Fatalf("retry: want succeeded with the same key, got %+v", ro)
	}
	if n := ordersFor(t, db, failed.Key); n != 1 {
		t.Fatalf("after the retry: want 1 order for the key, got %d", n)
	}
	// Abandoning a succeeded call is refused with exit 2, and says why.
	r = w.run("abandon", strconv.FormatInt(failed.ID, 10), "--note", "too late")
	wantExit(t, r, exitBadInput, "abandon of a succeeded call")
	stderrLines(t, r, "abandon of a succeeded call")
	if !strings.Contains(r.stderr, "succeeded") {
		t.Errorf("stderr should name the state that refuses the abandon:\n%s", r.stderr)
	}
	c := w.show(failed.ID)
	if c.State != "succeeded" || len(c.Decisions) != 1 || c.Decisions[0].Action != "retry" {
		t.Errorf("the refused abandon changed the call: %s %+v", c.State, c.Decisions)
	}
	if got := w.sent("create_order"); got[failed.Key] != 2 || got[lostA.Key] != 1 || got[lostB.Key] != 1 || len(got) != 3 {
		t.Errorf("wire log: want the failed key sent twice (call, retry) and each lost key once, got %v", got)
	}
}

// TestE2ENewSendsADeliberateSecondOrder: an identical call is held while
// the first is unknown; --new sends it as a new operation with a new key,
// and the server makes a second order, as the user asked.
func TestE2ENewSendsADeliberateSecondOrder(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	before := budgetOf(t, db, "bob")
	const args = `{"item":"gizmo","quantity":1,"buyer":"bob"}`
	first := parseCallOut(t, w.call(args, []string{"--timeout", "2s"}, "--hang-after-commit", "1"))
	if first.State != "unknown" {
		t.Fatalf("first call: want unknown, got %+v", first)
	}
	wantExit(t, w.call(args, nil), exitHeld, "identical call while the first is unknown")
	r := w.call(args, []string{"--new"})
	wantExit(t, r, exitOK, "identical call with --new")
	second := parseCallOut(t, r)
	if second.State != "succeeded" || second.Key == "" || second.Key == first.Key || second.ID == first.ID {
		t.Fatalf("--new: want a new succeeded call with a new key, got %+v (first %+v)", second, first)
	}
	if n := totalOrders(t, db); n != 2 {
		t.Fatalf("want two orders (the deliberate second one), got %d", n)
	}
	if ordersFor(t, db, first.Key) != 1 || ordersFor(t, db, second.Key) != 1 {
		t.Fatalf("want one order under each key")
	}
	if after := budgetOf(t, db, "bob"); after != before-2*100 {
		t.Errorf("bob's budget: %d before, %d after; want two deductions of 100", before, after)
	}
	if calls := w.list(); len(calls) != 2 {
		t.Fatalf("want 2 journal calls, got %d", len(calls))
	}
	if c := w.show(first.ID); c.State != "unknown" {
		t.Errorf("--new must leave the first call alone; it is %s", c.State)
	}
}

// TestE2ECallerKey: with --key the journal is the client's dedupe point.
// The same key and arguments after success return the stored result
// without sending; other arguments under the key are refused, naming the
// field; an unknown call's key is refused as a resend (use retry).
func TestE2ECallerKey(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	const key = "order-2026-12-02-alice-0001"
	const args = `{"item":"widget","quantity":4,"buyer":"alice"}`
	r := w.call(args, []string{"--key", key})
	wantExit(t, r, exitOK, "call with --key")
	first := parseCallOut(t, r)
	if first.State != "succeeded" || first.Key != key {
		t.Fatalf("want succeeded under the caller's key, got %+v", first)
	}

	// Same key, same arguments: the stored result, nothing sent.
	r = w.call(args, []string{"--key", key})
	wantExit(t, r, exitOK, "same key and arguments again")
	again := parseCallOut(t, r)
	if again.ID != first.ID || again.State != "succeeded" || string(again.Result) != string(first.Result) {
		t.Fatalf("want call %d's stored result, got %+v", first.ID, again)
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("the stored result was answered by sending: %d create_order requests on the wire", n)
	}
	if c := w.show(first.ID); len(c.Attempts) != 1 {
		t.Fatalf("the stored answer added an attempt: %d", len(c.Attempts))
	}

	// Same key, other arguments: refused, naming the field.
	r = w.call(`{"item":"widget","quantity":5,"buyer":"alice"}`, []string{"--key", key})
	wantExit(t, r, exitBadInput, "same key, other arguments")
	stderrLines(t, r, "key reuse")
	if !strings.Contains(r.stderr, "quantity") || strings.Contains(r.stderr, "buyer") {
		t.Errorf("stderr should name exactly the differing field (quantity):\n%s", r.stderr)
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("a refused key reuse was sent: %d create_order requests", n)
	}
	if calls := w.list(); len(calls) != 1 {
		t.Fatalf("a refused key reuse added a journal row: %d calls", len(calls))
	}
	if n := ordersFor(t, db, key); n != 1 {
		t.Fatalf("want 1 order under the caller's key, got %d", n)
	}

	// A caller key whose call is unknown: refused, the user is sent to retry.
	const key2 = "order-2026-12-02-alice-0002"
	lost := parseCallOut(t, w.call(`{"item":"gadget","quantity":1,"buyer":"alice"}`, []string{"--key", key2, "--timeout", "2s"}, "--hang-after-commit", "1"))
	if lost.State != "unknown" || lost.Key != key2 {
		t.Fatalf("want unknown under key2, got %+v", lost)
	}
	r = w.call(`{"item":"gadget","quantity":1,"buyer":"alice"}`, []string{"--key", key2})
	wantExit(t, r, exitHeld, "same key while unknown")
	if r.stdout != "" {
		if o := parseCallOut(t, r); !o.Held || o.HeldBy != lost.ID {
			t.Errorf("same key while unknown: stdout should say \"held\": true, \"held_by\": %d, got %+v", lost.ID, o)
		}
	}
	if !strings.Contains(r.stderr, "retry "+strconv.FormatInt(lost.ID, 10)) {
		t.Errorf("stderr should point at 'retry %d':\n%s", lost.ID, r.stderr)
	}
	if got := w.sent("create_order"); got[key2] != 1 {
		t.Fatalf("the refused key was resent: %v", got)
	}
}
