package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// verifyJournal is seedJournal's journal with two more decisions: three in
// all, on two calls.
func verifyJournal(t *testing.T) string {
	t.Helper()
	db := seedJournal(t)
	for _, args := range [][]string{{"note", "2", "asked bob"}, {"note", "1", "refund confirmed"}} {
		if _, errOut, code := runIn(t, append(args, "--db", db)...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
	}
	return db
}

func TestVerify(t *testing.T) {
	db := verifyJournal(t)
	out, errOut, code := runIn(t, "verify", "--db", db)
	if code != exitOK || errOut != "" || strings.Count(out, "\n") != 2 || !strings.HasPrefix(out, "calls intact: 2 calls, 5 links\n") ||
		!strings.Contains(out, "\ndecision log intact: 3 decisions, head decision 3 sha256 ") {
		t.Fatalf("verify on a clean log: %d %q %q", code, out, errOut)
	}
	head := strings.TrimSpace(out[strings.LastIndex(out, " "):])

	export := filepath.Join(t.TempDir(), "log.jsonl")
	out, _, code = runIn(t, "export", "--db", db)
	if code != 0 {
		t.Fatal("export failed")
	}
	os.WriteFile(export, []byte(out), 0o600)
	out, errOut, code = runIn(t, "verify", "--from", export)
	if code != exitOK || !strings.HasPrefix(out, "exported decision log intact: 3 decisions, head decision 3 sha256 "+head) {
		t.Fatalf("verify on the export: %d %q %q", code, out, errOut)
	}
	edited := filepath.Join(t.TempDir(), "edited.jsonl")
	b, _ := os.ReadFile(export)
	os.WriteFile(edited, []byte(strings.Replace(string(b), "asked bob", "asked eve", 1)), 0o600)
	out, errOut, code = runIn(t, "verify", "--from", edited)
	if code != exitFailed || !strings.Contains(out, "exported decision log broken at decision 2 (call 2): decision 2 (call 2, note by") {
		t.Fatalf("verify on an edited export: %d %q %q", code, out, errOut)
	}

	// A decision deleted by hand, the triggers that forbid it dropped first.
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec("DROP TRIGGER decisions_never_deleted; DELETE FROM decisions WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	sdb.Close()
	out, errOut, code = runIn(t, "verify", "--db", db)
	if code != exitFailed || !strings.Contains(out, "\ndecision log broken at decision 3 (call 1): decision 3 does not follow decision 1") ||
		strings.Count(errOut, "\n") != 1 {
		t.Fatalf("verify after a deletion: %d %q %q", code, out, errOut)
	}
	out, _, code = runIn(t, "verify", "--db", db, "--json")
	if code != exitFailed || !strings.Contains(out, `"intact": false`) || !strings.Contains(out, `"decision": 3`) {
		t.Fatalf("verify --json: %d %s", code, out)
	}
}

func TestVerifyInputErrors(t *testing.T) {
	db := verifyJournal(t)
	notExport := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notExport, []byte("not an export\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty.db")
	j, err := pending.Open(context.Background(), empty, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"verify", "--db", db, "--from", notExport}, exitBadInput, "both given"},
		{[]string{"verify", "--from", notExport}, exitBadInput, "line 1: not a call"},
		{[]string{"verify", "--from", filepath.Join(t.TempDir(), "none")}, exitBadInput, "no such file"},
		{[]string{"verify", "x", "--db", db}, exitBadInput, "unexpected argument"},
		{[]string{"verify", "--db", filepath.Join(t.TempDir(), "none.db")}, exitUnavailable, "no journal"},
		{[]string{"verify", "--db", empty}, exitOK, "intact: no decisions yet"},
	} {
		out, errOut, code := runIn(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.out) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%v: exit %d (want %d), %q %q (want %q)", tc.args, code, tc.code, out, errOut, tc.out)
		}
	}
}
