package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// TestE2EJournalCopyToPostgres: a single user's journal file, with a call
// that succeeded and one whose answer was lost, copied into a journal on
// PostgreSQL with `journal copy`: both arrive, the unknown one still holds
// an identical new call back there (nothing sent), the decision log
// verifies, a second copy is refused and --skip-existing makes it a no-op.
func TestE2EJournalCopyToPostgres(t *testing.T) {
	w := newWorld(t, t.TempDir())
	file := w.journal
	wantExit(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil), 0, "good write")
	lost := `{"item":"gadget","quantity":1,"buyer":"bob"}`
	wantExit(t, w.call(lost, []string{"--timeout", "1s"}, "--hang-after-commit", "1"), 3, "lost write")
	wantExit(t, w.run("note", "2", "asked the shop"), 0, "note")

	pg := pgtest.Database(t)
	copyCmd := func(extra ...string) cliResult {
		return cliIn(t, w.bin, w.dir, "", append([]string{"journal", "copy", "--from", file, "--to", pg}, extra...)...)
	}
	r := copyCmd()
	wantExit(t, r, 0, "journal copy")
	if !strings.Contains(r.stdout, "copied 2 of 2 calls (2 attempts, 1 decisions)") || !strings.Contains(r.stdout, "decision log intact: 1 decisions") {
		t.Fatalf("copy says:\n%s", r)
	}

	w.journal = pg
	got := w.list()
	if len(got) != 2 {
		t.Fatalf("the PostgreSQL journal lists %d calls after the copy, want 2", len(got))
	}
	sent := w.sentTotal("create_order")
	held := w.call(lost, nil)
	wantExit(t, held, 4, "the lost write made again on the team's journal")
	if w.sentTotal("create_order") != sent {
		t.Fatal("an identical call was sent although the copied call is unknown")
	}
	wantExit(t, w.run("verify"), 0, "verify the target")
	show := w.run("show", "2")
	if !strings.Contains(show.stdout, "asked the shop") {
		t.Fatalf("the copied note is missing:\n%s", show)
	}

	again := copyCmd()
	wantExit(t, again, 2, "a second copy")
	if !strings.Contains(again.stderr, "--skip-existing") || !strings.Contains(again.stderr, "Nothing was copied") {
		t.Fatalf("a second copy says:\n%s", again)
	}
	skip := copyCmd("--skip-existing")
	wantExit(t, skip, 0, "copy with --skip-existing")
	if !strings.Contains(skip.stdout, "copied 0 of 2 calls") || !strings.Contains(skip.stdout, "left out 2 calls") {
		t.Fatalf("copy with --skip-existing says:\n%s", skip)
	}
	if n := len(w.list()); n != 2 {
		t.Fatalf("after --skip-existing the target lists %d calls, want 2", n)
	}
}

// TestE2EJournalCopyBadInput: each mistake is named, exits as documented,
// and makes no journal.
func TestE2EJournalCopyBadInput(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.db")
	target := filepath.Join(dir, "target.db")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"journal", "copy", "--to", target}, 2, "both --from and --to"},
		{[]string{"journal", "copy", "--from", target, "--to", target}, 2, "the same journal"},
		{[]string{"journal", "copy", "--from", missing, "--to", target}, 5, "no journal at " + missing},
		{[]string{"journal", "copy", "--from", missing, "--to", target, "extra"}, 2, "unexpected argument"},
		{[]string{"journal", "copy", "--db", target, "--from", missing, "--to", target}, 2, "--db"},
	} {
		r := cliIn(t, e2eBin, dir, "", tc.args...)
		wantExit(t, r, tc.code, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 2 {
			t.Errorf("%v: stderr %q, want one or two lines naming %q", tc.args, r.stderr, tc.want)
		}
		for _, p := range []string{missing, target} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("%v made %s", tc.args, p)
			}
		}
	}
}
