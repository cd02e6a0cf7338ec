package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

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

// TestE2EPostgresVerify: verify on a team journal: intact; its export
// verified offline with the same head; then a decision deleted by hand
// (the triggers dropped, as a database owner could) is named, exit 1, and
// the export made before still verifies, with the head that shows it.
func TestE2EPostgresVerify(t *testing.T) {
	w := newWorld(t, t.TempDir())
	w.journal = pgtest.Database(t)
	for i := range 2 {
		args := fmt.Sprintf(`{"item":"widget","quantity":%d,"buyer":"alice"}`, i+1)
		wantExit(t, w.call(args, []string{"--timeout", "1s"}, "--hang-after-commit", "1"), 3, "lost write")
	}
	wantExit(t, w.run("note", "1", "asked the shop"), 0, "note")
	wantExit(t, w.run("abandon", "1", "--note", "cancelled"), 0, "abandon")
	wantExit(t, w.run("mark", "2", "applied", "--note", "order found"), 0, "mark")

	clean := w.run("verify")
	wantExit(t, clean, 0, "verify a clean log")
	if !strings.Contains(clean.stdout, "decision log intact: 3 decisions, head decision 3 sha256 ") {
		t.Fatalf("verify says:\n%s", clean)
	}
	head := clean.stdout[strings.LastIndex(clean.stdout, " ")+1:]

	exp := w.run("export")
	wantExit(t, exp, 0, "export")
	file := filepath.Join(w.dir, "log.jsonl")
	if err := os.WriteFile(file, []byte(exp.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := cliIn(t, w.bin, w.dir, "", "verify", "--from", file)
	wantExit(t, offline, 0, "verify the export")
	if !strings.HasSuffix(offline.stdout, head) {
		t.Fatalf("the export's head differs from the journal's (%s):\n%s", head, offline)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.journal)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DELETE FROM decisions WHERE id = 2"); err == nil {
		t.Fatal("a decision was deleted with the triggers in place")
	}
	for _, q := range []string{"ALTER TABLE decisions DISABLE TRIGGER USER", "DELETE FROM decisions WHERE id = 2"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	broken := w.run("verify")
	wantExit(t, broken, 1, "verify after a decision was deleted")
	if !strings.Contains(broken.stdout, "broken at decision 3") || !strings.Contains(broken.stdout, "does not follow decision 1") {
		t.Fatalf("verify after the deletion says:\n%s", broken)
	}
	wantExit(t, cliIn(t, w.bin, w.dir, "", "verify", "--from", file), 0, "the export made before still verifies")
}
