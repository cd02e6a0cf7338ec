package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// compensate, end to end on the demo server: an unknown create_order (the
// server committed it, the answer was lost) is undone with the policy's
// cancel_tool. Without a cancel_tool it is refused and nothing is sent;
// with one, the decision is on the order, the cancel is a journaled write
// of its own with its own key, linked both ways, and the server refunded
// the order exactly once.
func TestE2ECompensate(t *testing.T) {
	w := newWorld(t, t.TempDir())
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[tools.create_order]\ncancel_tool = \"cancel_order\"\ncancel_args = { order_key = \"{key}\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := parseCallOut(t, w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1"))
	if first.State != "unknown" {
		t.Fatalf("want unknown, got %+v", first)
	}
	id := strconv.FormatInt(first.ID, 10)
	db := w.db()
	if got := budgetOf(t, db, "alice"); got != 950 {
		t.Fatalf("alice's budget %d after the lost order, want 950", got)
	}

	r := w.run("compensate", id)
	wantExit(t, r, exitBadInput, "compensate without a cancel_tool")
	if !strings.Contains(r.stderr, "names no cancel_tool for create_order") || r.stdout != "" {
		t.Errorf("refusal: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
	if n := w.sentTotal("cancel_order"); n != 0 {
		t.Fatalf("%d cancel_order sent by a refused compensate", n)
	}
	if c := w.show(first.ID); len(c.Decisions) != 0 {
		t.Fatalf("a refused compensate recorded %d decisions", len(c.Decisions))
	}

	r = w.run("compensate", id, "--policy", policy, "--note", "customer never wanted it")
	wantExit(t, r, exitOK, "compensate")
	cancel := parseCallOut(t, r)
	if cancel.State != "succeeded" || cancel.ID == first.ID || cancel.Key == first.Key || cancel.Key == "" {
		t.Fatalf("compensate printed %+v; want the cancel's own call, succeeded, with its own key", cancel)
	}
	if !strings.Contains(r.stderr, "was made to undo call "+id) {
		t.Errorf("stderr does not say what was undone:\n%s", r.stderr)
	}
	if got := budgetOf(t, db, "alice"); got != 1000 {
		t.Errorf("alice's budget %d after the cancel, want 1000 (refunded once)", got)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM orders WHERE idempotency_key = ? AND cancelled_at IS NOT NULL", first.Key); n != 1 {
		t.Errorf("%d cancelled orders under the key, want 1", n)
	}
	if n := w.sent("cancel_order")[cancel.Key]; n != 1 {
		t.Errorf("the cancel was sent %d times under its key, want 1", n)
	}

	orig := w.show(first.ID)
	if orig.State != "unknown" || len(orig.Decisions) != 1 || orig.Decisions[0].Action != "compensate" ||
		!strings.Contains(string(orig.Decisions[0].Evidence), "cancel_order") || orig.Decisions[0].Note != "customer never wanted it" {
		t.Errorf("the order after compensate: %s, decisions %+v; want it unknown with one compensate decision naming cancel_order", orig.State, orig.Decisions)
	}
	r = w.run("show", id)
	if !strings.Contains(r.stdout, "compensated by call "+strconv.FormatInt(cancel.ID, 10)) {
		t.Errorf("show of the order lacks the link to its cancel:\n%s", r.stdout)
	}
	r = w.run("show", strconv.FormatInt(cancel.ID, 10))
	if !strings.Contains(r.stdout, "compensates call "+id) || !strings.Contains(r.stdout, "tool     cancel_order") {
		t.Errorf("show of the cancel lacks the link to the order:\n%s", r.stdout)
	}

	// Undone once is undone: a second compensate is refused, nothing sent.
	r = w.run("compensate", id, "--policy", policy)
	wantExit(t, r, exitBadInput, "compensate twice")
	if !strings.Contains(r.stderr, "already undone by call "+strconv.FormatInt(cancel.ID, 10)) || r.stdout != "" {
		t.Errorf("second compensate: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}

	// The cancel itself has no cancel_tool: refused, nothing sent.
	r = w.run("compensate", strconv.FormatInt(cancel.ID, 10), "--policy", policy)
	wantExit(t, r, exitBadInput, "compensate the cancel")
	if !strings.Contains(r.stderr, "names no cancel_tool for cancel_order") || r.stdout != "" {
		t.Errorf("compensate of the cancel: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}
	if n := w.sentTotal("cancel_order"); n != 1 {
		t.Errorf("%d cancel_order requests in all, want 1", n)
	}
}
