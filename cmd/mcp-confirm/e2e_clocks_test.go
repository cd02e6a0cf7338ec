package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestE2ETwoClocks: a slow write that reports progress outlives its idle
// timeout (each progress notification resets it), but not the absolute
// cap, max_total, which nothing resets; the reason says which clock fired.
func TestE2ETwoClocks(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()

	// 2.5s of work, progress every 250ms, idle timeout 1s: succeeds.
	r := w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--delay", "2500ms")
	wantExit(t, r, exitOK, "slow write with progress under a 1s idle clock")
	ok := parseCallOut(t, r)
	if n := ordersFor(t, db, ok.Key); n != 1 {
		t.Fatalf("want 1 order, got %d", n)
	}

	// The same with max_total 1500ms: the absolute clock fires.
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[defaults]\nmax_total = \"1500ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "1s", "--policy", policy}, "--delay", "4s")
	wantExit(t, r, exitUnknown, "slow write past max_total")
	lost := parseCallOut(t, r)
	if lost.State != "unknown" || lost.Reason != "absolute timeout" {
		t.Fatalf("want unknown (absolute timeout), got %+v", lost)
	}
	c := w.show(lost.ID)
	if a := c.Attempts[0]; a.Clock != "absolute" || a.Reason != "absolute timeout" {
		t.Fatalf("attempt 1: want ended by the absolute clock, got %+v", a)
	}
	// The cancel that follows the timeout stops the demo server before it
	// commits, and its answer saying so may still arrive (a late failure).
	if c.State != "unknown" && !(c.State == "failed" && c.Attempts[0].Late) {
		t.Fatalf("call: want unknown, or failed by the late answer to the cancel; got %s (%q)", c.State, c.Reason)
	}
	if n := ordersFor(t, db, lost.Key); n != 0 {
		t.Fatalf("the write was cancelled before it committed, yet %d orders", n)
	}
	if got := w.sent("create_order"); got[lost.Key] != 1 {
		t.Fatalf("the timed-out write was resent: %v", got)
	}
}
