package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read commands open the journal read-only (SPEC §9 "Journal identity"):
// they create nothing and are not kept waiting by another process's write
// transaction.

func TestE2EReadCommandsCreateNoJournal(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "nonexistent", "dir")
	db := filepath.Join(dir, "j.db")
	for _, args := range [][]string{{"list"}, {"show", "1"}, {"export"}, {"stats"}} {
		r := cliIn(t, e2eFastBin, home, "", append(args, "--db", db)...)
		wantExit(t, r, exitUnavailable, strings.Join(args, " ")+" on no journal")
		if !strings.Contains(r.stderr, "no journal at "+db) {
			t.Fatalf("%s: stderr does not say 'no journal at %s':\n%s", args[0], db, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(home, "nonexistent")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s created a folder: %v", args[0], err)
		}
	}
}

func TestE2EReadCommandsWhileAnotherHoldsTheWriteLock(t *testing.T) {
	db := seedJournal(t)
	home := t.TempDir()
	h, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := h.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer c.ExecContext(context.Background(), "ROLLBACK")
	for _, args := range [][]string{{"list"}, {"show", "1"}, {"export"}, {"stats"}, {"stats", "--check"}} {
		r := cliIn(t, e2eFastBin, home, "", append(args, "--db", db)...)
		wantExit(t, r, exitOK, strings.Join(args, " ")+" while another process holds BEGIN IMMEDIATE")
	}
}

func TestE2ETightensATooOpenJournal(t *testing.T) {
	db := seedJournal(t)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	r := cliIn(t, e2eFastBin, t.TempDir(), "", "list", "--db", db)
	wantExit(t, r, exitOK, "list on a 0644 journal")
	if want := "mcp-confirm: tightened " + db + " from 0644 to 0600"; !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr lacks %q:\n%s", want, r.stderr)
	}
	if st, _ := os.Stat(db); st.Mode().Perm() != 0o600 {
		t.Fatalf("journal is %o after list", st.Mode().Perm())
	}
}

func TestE2ERefusesAJournalOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a file owned by another user (os.Chown)")
	}
	db := seedJournal(t)
	if err := os.Chown(db, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"note", "1", "x"}} {
		r := cliIn(t, e2eFastBin, t.TempDir(), "", append(args, "--db", db)...)
		wantExit(t, r, exitUnavailable, args[0]+" on another user's journal")
		if !strings.Contains(r.stderr, db) || !strings.Contains(r.stderr, "chown") {
			t.Fatalf("%s: stderr does not name the file and the fix:\n%s", args[0], r.stderr)
		}
	}
}
