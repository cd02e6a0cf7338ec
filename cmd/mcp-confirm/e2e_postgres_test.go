package main

import (
	"strings"
	"sync"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// TestE2EPostgresJournal: the CLI on a journal in PostgreSQL (--db with a
// libpq connection string), as on a SQLite file: a write that succeeds,
// one whose answer is lost (unknown, not resent), list and show, two
// operators abandoning the same call at once (one wins, the other is
// refused), and verify of the decision log.
func TestE2EPostgresJournal(t *testing.T) {
	w := newWorld(t, t.TempDir())
	w.journal = pgtest.Database(t)

	wantExit(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil), 0, "good write")
	wantExit(t, w.call(`{"item":"gadget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1"), 3, "lost write")
	if n := w.sentTotal("create_order"); n != 2 {
		t.Fatalf("create_order sent %d times, want 2 (one per call, none resent)", n)
	}
	list := w.run("list")
	wantExit(t, list, 0, "list")
	if !strings.Contains(list.stdout, "unknown") || !strings.Contains(list.stdout, "succeeded") {
		t.Fatalf("list on PostgreSQL:\n%s", list)
	}

	var wg sync.WaitGroup
	results := make([]cliResult, 2)
	for i, who := range []string{"alice", "bob"} {
		wg.Go(func() { results[i] = w.run("abandon", "2", "--note", who+" cancelled") })
	}
	wg.Wait()
	won := 0
	for _, r := range results {
		if r.code == 0 {
			won++
		} else if !strings.Contains(r.stderr, "call 2 was just decided by ") || !strings.Contains(r.stderr, "(abandon, ") ||
			!strings.Contains(r.stderr, "nothing was done") || !strings.Contains(r.stderr, "show 2") {
			t.Errorf("the loser of two abandons is not told who won:\n%s", r)
		}
	}
	if won != 1 {
		t.Fatalf("two abandons at once: %d won, want 1\n%s\n%s", won, results[0], results[1])
	}
	show := w.run("show", "2")
	wantExit(t, show, 0, "show")
	if !strings.Contains(show.stdout, "abandoned") || strings.Count(show.stdout, "cancelled") != 1 {
		t.Fatalf("show after two abandons:\n%s", show)
	}
	wantExit(t, w.run("verify"), 0, "verify")
}
