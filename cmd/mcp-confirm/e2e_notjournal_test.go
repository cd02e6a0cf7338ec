package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fileState is what a refused open must leave as it was.
type fileState struct {
	mode  os.FileMode
	mtime time.Time
	size  int64
	bytes []byte
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{mode: st.Mode(), mtime: st.ModTime(), size: st.Size(), bytes: b}
}

func namesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestE2ENotAJournalUntouched (issue 44 item 9): a --db that names a file
// which is not this program's journal (a copy of /etc/passwd, another
// application's SQLite database, in rollback or WAL mode, an old empty
// file) is refused by list, show and call with the usual message and exit
// code, and nothing about the file changes: not its mode (it was once
// tightened to 0600 before the refusal), mtime, size or bytes, and no -wal,
// -shm, -journal, .owners or .secret appears beside it.
func TestE2ENotAJournalUntouched(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil || len(passwd) == 0 {
		passwd = []byte("root:x:0:0:root:/root:/bin/sh\n")
	}
	makers := map[string]func(t *testing.T, path string){
		"passwd": func(t *testing.T, path string) {
			if err := os.WriteFile(path, passwd, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"sqlite of another app": func(t *testing.T, path string) {
			otherApp(t, path, "PRAGMA user_version = 7", "CREATE TABLE bookmarks(url TEXT)", "INSERT INTO bookmarks VALUES('https://example.com')")
		},
		"sqlite of another app, WAL": func(t *testing.T, path string) {
			otherApp(t, path, "PRAGMA journal_mode = WAL", "CREATE TABLE notes(body TEXT)", "INSERT INTO notes VALUES('hello')")
		},
		"sqlite of another app with an application_id": func(t *testing.T, path string) {
			otherApp(t, path, "PRAGMA application_id = 1234", "CREATE TABLE t(x)")
		},
		"sqlite of another app, tables only": func(t *testing.T, path string) {
			otherApp(t, path, "CREATE TABLE t(x)")
		},
		"old empty file": func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := newWorld(t, dir)
			w.journal = filepath.Join(dir, "passwd")
			mk(t, w.journal)
			if err := os.Chmod(w.journal, 0o644); err != nil {
				t.Fatal(err)
			}
			before, names := stateOf(t, w.journal), namesIn(t, dir)
			for _, args := range [][]string{
				{"list"},
				{"show", "1"},
				append([]string{"call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`}, w.server()...),
			} {
				r := w.run(args...)
				wantExit(t, r, exitUnavailable, strings.Join(args[:1], " "))
				if !strings.Contains(r.stderr, "not an mcp-confirm journal") {
					t.Errorf("%s: stderr does not say it is not a journal:\n%s", args[0], r)
				}
				after := stateOf(t, w.journal)
				if after.mode != before.mode || !after.mtime.Equal(before.mtime) || after.size != before.size || !bytes.Equal(after.bytes, before.bytes) {
					t.Fatalf("%s changed the refused file: mode %v→%v, mtime %v→%v, size %d→%d, same bytes %v",
						args[0], before.mode, after.mode, before.mtime, after.mtime, before.size, after.size, bytes.Equal(after.bytes, before.bytes))
				}
				if now := namesIn(t, dir); !slices.Equal(now, names) {
					t.Fatalf("%s left files beside the refused one: %v, before %v", args[0], now, names)
				}
			}
			if _, err := os.Stat(w.demoDB); err == nil {
				t.Fatal("the refused call started the server")
			}
		})
	}
}

// otherApp makes a SQLite database as another program would, with the
// same driver, and closes it (a WAL one leaves no -wal behind).
func otherApp(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Let the mtime be unlike any a later write in the same clock tick
	// would give, so a change shows.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}
