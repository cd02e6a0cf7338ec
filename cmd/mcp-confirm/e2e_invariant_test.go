package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The invariant under attack (issue: no write done twice, no false outcome,
// no lost intent), end to end through the built binary, a real demo server
// and real SQLite files.

// TestE2ELateSettleHoldsIdenticalCalls: a write reported unknown whose
// answer then arrives late (as the session closes) is settled; the user
// reruns the same command, with the quantity spelled another way, and
// nothing is sent: the stored outcome comes back, exit 0, with a line
// saying so. After 'ack' an identical call is sent again.
func TestE2ELateSettleHoldsIdenticalCalls(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	first := w.call(`{"item":"widget","quantity":3,"buyer":"alice"}`, []string{"--timeout", "1s"},
		"--hang-after-commit", "1", "--answer-after", "2s")
	out := parseCallOut(t, first)
	// The idle clock fires at 1 s, so the caller is first told "unknown";
	// the answer comes at 2 s, while the session closes, and the call
	// re-reads what it came to: succeeded, said on stderr.
	wantExit(t, first, exitOK, "call whose answer came as the session closed")
	if out.State != "succeeded" || !strings.Contains(first.stderr, "arrived as the session closed") {
		t.Fatalf("want the late answer reported, got %s", first)
	}
	c := w.show(out.ID)
	if len(c.Attempts) != 1 || !c.Attempts[0].Late || c.Attempts[0].Outcome != "succeeded" {
		t.Fatalf("want one attempt, answered late: %+v", c.Attempts)
	}

	// The same operation again, 3.0 for 3: held by the late settle.
	again := w.call(`{"item":"widget","quantity":3.0,"buyer":"alice"}`, nil)
	wantExit(t, again, exitOK, "identical call after a late settle")
	stderrLines(t, again, "late-settle hold")
	want := "call " + strconv.FormatInt(out.ID, 10) + " with the same arguments settled late (succeeded); nothing was sent; --new makes another"
	if !strings.Contains(again.stderr, want) {
		t.Errorf("stderr should say %q:\n%s", want, again.stderr)
	}
	var replay struct {
		callOut
		ReplayedFrom int64 `json:"replayed_from"`
	}
	if err := json.Unmarshal([]byte(again.stdout), &replay); err != nil || replay.ReplayedFrom != out.ID ||
		replay.ID != out.ID || replay.State != "succeeded" || len(replay.Result) == 0 {
		t.Fatalf("want call %d's stored result, marked replayed_from, got %s (%v)", out.ID, again.stdout, err)
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("the held call was sent: %d create_order requests on the wire", n)
	}
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if calls := w.list(); len(calls) != 1 {
		t.Fatalf("the held call left a journal row: %d calls", len(calls))
	}

	// The operator acknowledges it; the hold ends, the next identical call
	// is a new operation and is sent.
	ack := w.run("ack", strconv.FormatInt(out.ID, 10), "--note", "seen it")
	wantExit(t, ack, exitOK, "ack")
	if d := w.show(out.ID).Decisions; len(d) != 1 || d[0].Action != "ack" || d[0].Note != "seen it" {
		t.Fatalf("want one ack decision, got %+v", d)
	}
	wantExit(t, w.run("ack", strconv.FormatInt(out.ID, 10)), exitBadInput, "second ack")
	third := w.call(`{"item":"widget","quantity":3e0,"buyer":"alice"}`, nil)
	wantExit(t, third, exitOK, "identical call after ack")
	if o := parseCallOut(t, third); o.ID == out.ID || o.State != "succeeded" {
		t.Fatalf("after ack want a new call sent, got %s", third)
	}
	if n := totalOrders(t, db); n != 2 {
		t.Fatalf("%d orders, want 2 (the acknowledged one and the new one)", n)
	}
}

// TestE2ENumbersAreCanonical: quantity 3 becomes unknown; quantity 3.0 is
// the same operation and is held (the demo's own idempotency layer calls
// them the same, so the journal must too).
func TestE2ENumbersAreCanonical(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	first := w.call(`{"item":"widget","quantity":3,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1")
	wantExit(t, first, exitUnknown, "lost response")
	for _, spelling := range []string{`3.0`, `3e0`, `30e-1`, `0.3E1`} {
		r := w.call(`{"buyer":"alice","item":"widget","quantity":`+spelling+`}`, nil)
		wantExit(t, r, exitHeld, "quantity "+spelling)
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("a re-spelled resend was sent: %d create_order requests", n)
	}
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// TestE2ERetryUsesTheCallsOwnServer: a call made on a server of its own
// (another orders file) is queried and retried, as the hint says, with no
// server named: they go to that server, never to the built-in demo with
// other orders. A different server named explicitly is refused unless
// --any-server, which is recorded.
func TestE2ERetryUsesTheCallsOwnServer(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	first := w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1")
	wantExit(t, first, exitUnknown, "lost response")
	out := parseCallOut(t, first)
	id := strconv.FormatInt(out.ID, 10)
	// The hint is a command that works when pasted: it names the journal.
	if !strings.Contains(first.stderr, "mcp-confirm --db "+w.journal+" retry "+id) {
		t.Errorf("the hint should be a command that works as pasted:\n%s", first.stderr)
	}

	// Another server, named explicitly: refused, nothing sent anywhere.
	other := filepath.Join(w.dir, "other-orders.db")
	r := w.run("retry", id, "--", w.bin, "demo-server", "--db", other)
	wantExit(t, r, exitBadInput, "retry on another server")
	if !strings.Contains(r.stderr, "was made on") || !strings.Contains(r.stderr, "nothing was sent") {
		t.Errorf("the refusal should name the call's server:\n%s", r.stderr)
	}
	if c := w.show(out.ID); len(c.Attempts) != 1 || len(c.Decisions) != 0 {
		t.Fatalf("a refused retry changed the call: %+v", c)
	}

	// No server named: the call's own (the world's wrapped demo server).
	r = w.run("query", id, "--tool", "find_orders", "--args", `{"idempotency_key":"{key}"}`)
	wantExit(t, r, exitOK, "query on the call's own server")
	r = w.run("retry", id)
	wantExit(t, r, exitOK, "retry on the call's own server")
	if ro := parseCallOut(t, r); ro.State != "succeeded" || !ro.Replayed {
		t.Fatalf("the call's own server replays the order it committed; got %s", r)
	}
	if n := ordersFor(t, db, out.Key); n != 1 {
		t.Fatalf("%d orders for the key, want 1", n)
	}
	if got := w.sent("create_order"); got[out.Key] != 2 {
		t.Fatalf("want the key sent twice (call, retry) to the call's own server; wire log has %v", got)
	}
	// The built-in demo beside the journal was never started.
	if _, err := os.Stat(filepath.Join(w.dir, "demo-server.db")); err == nil {
		t.Fatalf("the built-in demo server was used for a call made on another server")
	}
}

// TestE2EAnyServerIsRecorded: --any-server sends to the named server, and
// the override, with both identities, is kept with the decision.
func TestE2EAnyServerIsRecorded(t *testing.T) {
	w := newWorld(t, t.TempDir())
	first := w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1")
	wantExit(t, first, exitUnknown, "lost response")
	id := strconv.FormatInt(parseCallOut(t, first).ID, 10)
	r := w.run(append([]string{"retry", id, "--any-server"}, w.server()...)...)
	wantExit(t, r, exitOK, "retry with --any-server")
	c := w.show(parseCallOut(t, r).ID)
	if len(c.Decisions) != 1 || !strings.Contains(string(c.Decisions[0].Evidence), `"recorded_identity"`) {
		t.Fatalf("the override should be recorded with both identities: %+v", c.Decisions)
	}
}
