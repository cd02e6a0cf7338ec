package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verifyWorld records, through the built binary and the demo server, a
// call that succeeded, two lost ones (one abandoned, one left unknown), and
// a lost one with a note and an abandon; it returns the world and the
// calls' keys by id.
func verifyWorld(t *testing.T) (*world, map[int64]string) {
	t.Helper()
	w := newWorld(t, t.TempDir())
	wantExit(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil), exitOK, "a call that succeeds")
	for i := range 3 {
		args := fmt.Sprintf(`{"item":"gadget","quantity":%d,"buyer":"bob"}`, i+1)
		wantExit(t, w.call(args, []string{"--timeout", "1s"}, "--hang-after-commit", "1"), exitUnknown, "a lost write")
	}
	wantExit(t, w.run("abandon", "2", "--note", "cancelled"), exitOK, "abandon 2")
	wantExit(t, w.run("note", "4", "asked the shop"), exitOK, "note on 4")
	wantExit(t, w.run("abandon", "4", "--note", "refunded"), exitOK, "abandon 4")
	keys := map[int64]string{}
	for id := int64(1); id <= 4; id++ {
		keys[id] = parseCallOut(t, w.run("show", fmt.Sprint(id), "--json")).Key
		if keys[id] == "" {
			t.Fatalf("call %d has no key", id)
		}
	}
	return w, keys
}

// copyJournal copies the journal (and its WAL and secret, if any) to a
// folder of its own, so that each tampering starts from the same file.
func copyJournal(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "journal.db")
	for _, suffix := range []string{"", "-wal", ".secret"} {
		b, err := os.ReadFile(from + suffix)
		if os.IsNotExist(err) && suffix != "" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// TestE2EVerifyRewrittenCalls: each rewrite of a call that the issue names
// (44 item 11), done with SQL as anyone who can write the file could, is
// reported by verify, naming the call by id and key, exit 1; an untouched
// journal verifies intact, exit 0.
func TestE2EVerifyRewrittenCalls(t *testing.T) {
	w, keys := verifyWorld(t)
	clean := w.run("verify")
	wantExit(t, clean, exitOK, "verify an untouched journal")
	if !strings.HasPrefix(clean.stdout, "calls intact: 4 calls, ") || !strings.Contains(clean.stdout, "\ndecision log intact: 3 decisions") {
		t.Fatalf("verify on the untouched journal says:\n%s", clean)
	}
	for _, tc := range []struct {
		name  string
		call  int64
		stmts []string
		want  string
	}{
		{"abandoned made applied", 2, []string{"DROP TRIGGER calls_terminal_stays", "UPDATE calls SET state = 'applied' WHERE id = 2"},
			"call 2 is applied, but its chained history ends abandoned"},
		{"unknown made failed", 3, []string{"UPDATE calls SET state = 'failed', reason = 'the server said no' WHERE id = 3"},
			"call 3 is failed, but its chained history ends unknown"},
		{"arguments rewritten", 1, []string{`UPDATE calls SET args = '{"item":"widget","quantity":100,"buyer":"alice"}' WHERE id = 1`},
			"call 1 was changed after it was recorded"},
		{"a call with decisions deleted", 4, []string{"DROP TRIGGER calls_never_deleted", "DROP TRIGGER decisions_never_deleted",
			"DELETE FROM decisions WHERE call_id = 4", "DELETE FROM calls WHERE id = 4"},
			"call 4 had 3 chained links (the last: decision, abandoned) but is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyJournal(t, w.journal)
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.stmts {
				if _, err := db.Exec(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			db.Close()
			r := cliIn(t, w.bin, w.dir, "", "verify", "--db", path)
			wantExit(t, r, exitFailed, "verify after: "+tc.name)
			line := fmt.Sprintf("call %d (key %s) broken: %s", tc.call, keys[tc.call], tc.want)
			if !strings.Contains(r.stdout, line) || !strings.Contains(r.stderr, "changed outside mcp-confirm") {
				t.Fatalf("verify after %s says:\n%s\nwant the line %q", tc.name, r, line)
			}
		})
	}
}

// TestE2EVerifyOlderJournal: a journal written by 8366ae4, whose chain
// covered decisions only (pending/testdata/README.md), verifies intact
// after the upgrade, saying which calls its chain covers by decisions
// only; before it, verify says what to do and changes nothing.
func TestE2EVerifyOlderJournal(t *testing.T) {
	dir := t.TempDir()
	path := copyJournal(t, filepath.Join("..", "..", "pending", "testdata", "v7-journal.db"))
	before := cliIn(t, e2eBin, dir, "", "verify", "--db", path)
	wantExit(t, before, exitUnavailable, "verify before the upgrade")
	if !strings.Contains(before.stderr, "run a writing command") {
		t.Fatalf("verify before the upgrade says:\n%s", before)
	}
	wantExit(t, cliIn(t, e2eBin, dir, "", "note", "5", "after the upgrade", "--db", path), exitOK, "a note, which upgrades it")
	after := cliIn(t, e2eBin, dir, "", "verify", "--db", path)
	wantExit(t, after, exitOK, "verify after the upgrade")
	want := "calls intact: 5 calls, 0 links; calls 1 to 5 were recorded before calls were chained (schema 8): " +
		"until then their history is covered by the decision log only\ndecision log intact: 5 decisions, head decision 5 sha256 "
	if !strings.HasPrefix(after.stdout, want) {
		t.Fatalf("verify after the upgrade says:\n%s\nwant it to begin %q", after, want)
	}
}
