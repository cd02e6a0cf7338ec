package pending

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// madeJournal makes a journal at dir/journal.db and closes it.
func madeJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRefusesFilesOfAnotherUser(t *testing.T) {
	sqliteOnly(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files owned by another user (os.Chown)")
	}
	const other = 65534
	for _, suffix := range []string{"", "-wal", "-shm", ".secret", ".owners"} {
		t.Run("journal"+suffix, func(t *testing.T) {
			path := madeJournal(t)
			target := path + suffix
			if suffix == ".owners" {
				if err := os.MkdirAll(target, 0o700); err != nil {
					t.Fatal(err)
				}
			} else if _, err := os.Stat(target); err != nil {
				if err := os.WriteFile(target, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chown(target, other, other); err != nil {
				t.Fatal(err)
			}
			for name, open := range map[string]func(context.Context, string, Options) (*Journal, error){
				"Open": Open, "OpenReadOnly": OpenReadOnly} {
				j, err := open(context.Background(), path, Options{})
				if err == nil {
					j.Close()
					t.Fatalf("%s accepted %s owned by uid %d", name, target, other)
				}
				if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "chown") {
					t.Fatalf("%s: %v; want ErrNotOwned naming %s and chown", name, err, target)
				}
				var oe *OwnershipError
				if !errors.As(err, &oe) || oe.Problem != OtherUsersFile || strings.Contains(err.Error(), "--db") {
					t.Fatalf("%s: %v; want an OwnershipError, OtherUsersFile, naming no flag", name, err)
				}
			}
		})
	}
}

func TestTightensTooOpenFilesOfThisUser(t *testing.T) {
	sqliteOnly(t)
	for _, mode := range []os.FileMode{0o666, 0o644} {
		path := madeJournal(t)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ownersDir(path), 0o777); err != nil {
			t.Fatal(err)
		}
		var got []Tightening
		j, err := Open(context.Background(), path, Options{OnTighten: func(tt Tightening) { got = append(got, tt) }})
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		want := []Tightening{{path, mode, 0o600}, {ownersDir(path), 0o777, 0o700}}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("tightened %v, want %v", got, want)
		}
		if s, w := got[0].String(), fmt.Sprintf("tightened %s from %04o to 0600", path, uint32(mode)); s != w {
			t.Fatalf("line %q, want %q", s, w)
		}
		for p, m := range map[string]os.FileMode{path: 0o600, ownersDir(path): 0o700} {
			st, _ := os.Stat(p)
			if st.Mode().Perm() != m {
				t.Fatalf("%s is %o, want %o", p, st.Mode().Perm(), m)
			}
		}
	}
}

func TestRefusesAnOpenFolder(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "journal.db")
	_, err := Open(context.Background(), path, Options{})
	if !errors.Is(err, ErrTooOpen) || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("Open in a 0777 folder: %v; want ErrTooOpen", err)
	}
	if oe := (*OwnershipError)(nil); !errors.As(err, &oe) || oe.Problem != FolderOpenToOthers || strings.Contains(err.Error(), "--db") {
		t.Fatalf("Open in a 0777 folder: %v; want an OwnershipError, FolderOpenToOthers, naming no flag", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a journal was created in the refused folder: %v", err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil { // sticky, as /tmp
		t.Fatal(err)
	}
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("a sticky shared folder: %v", err)
	}
	j.Close()
}

func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	sqliteOnly(t)
	dir := filepath.Join(t.TempDir(), "no", "dir")
	path := filepath.Join(dir, "j.db")
	_, err := OpenReadOnly(context.Background(), path, Options{})
	if !errors.Is(err, ErrNoJournal) || err.Error() != "no journal at "+path {
		t.Fatalf("got %v, want ErrNoJournal", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a folder was created: %v", err)
	}
}

// holdWriteLock holds BEGIN IMMEDIATE on path from a second sql.DB until
// the test ends.
func holdWriteLock(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "INSERT INTO events (at, kind, call_id, detail) VALUES ('x', 'test', 0, 'held')"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.ExecContext(context.Background(), "ROLLBACK")
		c.Close()
		db.Close()
	})
}

func TestOpensWhileAnotherHoldsTheWriteLock(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Settled, so no recovery is due (a dead owner's in_flight call would
	// need the write lock, rightly).
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	holdWriteLock(t, path)
	opts := Options{BusyTimeout: 200 * time.Millisecond}

	r, err := OpenReadOnly(ctx, path, opts)
	if err != nil {
		t.Fatalf("OpenReadOnly under another's write lock: %v", err)
	}
	calls, err := r.List(ctx, Filter{})
	if err != nil || len(calls) != 1 {
		t.Fatalf("List: %v %v", calls, err)
	}
	if _, err := r.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Export(ctx, time.Time{}, func(Call) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.RecordEvent(ctx, EventSessionStarted, 0, "x"); !errors.Is(err, ErrWriteReadOnly) {
		t.Fatalf("a write on a read-only journal: %v", err)
	}
	r.Close()

	w, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatalf("Open (no migration needed) under another's write lock: %v", err)
	}
	w.Close()
}

func TestOpenReadOnlyRecoversOnlyDeadOwnersCalls(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	j.Close() // its owner is gone; the call is still in_flight in the file
	r, err := OpenReadOnly(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Get(ctx, c.ID)
	if err != nil || got.State != StateUnknown || got.Reason != ReasonRecovered {
		t.Fatalf("read-only open of a dead owner's call: %+v %v; want unknown, recovered", got, err)
	}
}
