package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2ETwoClocks: a slow write that reports progress outlives its idle
// timeout (each progress notification resets it), but not the absolute
// cap, max_total, which nothing resets; the reason says which clock fired.
func TestE2ETwoClocks(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()

	// 3s of work, progress every 250ms, idle timeout 2s: succeeds. (Only a
	// progress gap of 2s, eight times the interval, would end it.)
	r := w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, []string{"--timeout", "2s"}, "--delay", "3s")
	wantExit(t, r, exitOK, "slow write with progress under a 2s idle clock")
	ok := parseCallOut(t, r)
	if n := ordersFor(t, db, ok.Key); n != 1 {
		t.Fatalf("want 1 order, got %d", n)
	}

	// 8s of work with max_total 3500ms: the absolute clock fires.
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[defaults]\nmax_total = \"3500ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "2s", "--policy", policy}, "--delay", "8s")
	// The attempt ends unknown by the absolute clock. The cancel that
	// follows stops the demo server before it commits, and its answer
	// saying so ("stopped before committing", isError) may come in before
	// the command ends: then the call is failed by that late answer (exit 1).
	lost := parseCallOut(t, r)
	switch {
	case r.code == exitUnknown && lost.State == "unknown" && lost.Reason == "absolute timeout":
	case r.code == exitFailed && lost.State == "failed" && strings.Contains(string(lost.Result), "before committing"):
	default:
		t.Fatalf("slow write past max_total: want unknown (absolute timeout), or failed by the answer to the cancel; got %s", r)
	}
	c := w.show(lost.ID)
	if a := c.Attempts[0]; a.Clock != "absolute" || a.Reason != "absolute timeout" {
		t.Fatalf("attempt 1: want ended by the absolute clock, got %+v", a)
	}
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
