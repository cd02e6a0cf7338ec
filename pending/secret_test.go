package pending

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// childHold opens the journal and records the intent childIntent records,
// with the resend hold on, and says "held N" or "recorded N".
func childHold(path string) {
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	in := intent("create_order", `{"item":"widget"}`)
	in.Hold, in.Key = true, "another-key"
	c, err := j.RecordIntent(context.Background(), in)
	var held *HeldError
	switch {
	case errors.As(err, &held):
		fmt.Printf("held %d\n", held.CallID)
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Printf("recorded %d\n", c.ID)
	}
	j.Close()
}

// childSeal opens the journal and prints the seal of a fixed fingerprint.
func childSeal(path string) {
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(j.Seal("c1:0123"))
	j.Close()
}

// The journal never holds a fingerprint its caller made, only the keyed
// form: a file, WAL and all, in which the bare fingerprint of every
// candidate CVV is looked for finds none, though the redacted call is there.
func TestJournalAloneDoesNotRevealTheFingerprint(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := openTest(t, path)
	cvv := func(n int) string {
		sum := sha256.Sum256([]byte(fmt.Sprintf(`{"card":"4111111111111111","cvv":"%03d"}`, n)))
		return "c1:" + hex.EncodeToString(sum[:])
	}
	in := intent("pay", `{"card":"4111111111111111","cvv":"[redacted]"}`)
	in.Fingerprint = cvv(123)
	c, err := j.RecordIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Fingerprint, "h1:") || c.Fingerprint != j.Seal(cvv(123)) {
		t.Fatalf("stored fingerprint %q, want the seal of the caller's", c.Fingerprint)
	}
	var stored []byte
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b...)
	}
	if !bytes.Contains(stored, []byte(c.Fingerprint)) {
		t.Fatal("the sealed fingerprint is not in the files read: the test reads the wrong files")
	}
	for n := range 1000 {
		if bytes.Contains(stored, []byte(cvv(n))) || bytes.Contains(stored, []byte(strings.TrimPrefix(cvv(n), "c1:"))) {
			t.Fatalf("the bare fingerprint of CVV %03d is in the journal", n)
		}
	}
	st, err := os.Stat(secretPath(path))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v, want mode 0600", st, err)
	}
}

// Processes opening one new journal at once make one secret between them,
// and the hold of one process holds back the other's identical intent.
func TestSecretSharedAcrossProcesses(t *testing.T) {
	for r := range 10 {
		path := filepath.Join(t.TempDir(), "journal.db")
		var seals []string
		var outs []interface{ ReadString(byte) (string, error) }
		for range 4 {
			_, out, _ := startChild(t, "seal", "PENDING_DB="+testDB(t, path))
			outs = append(outs, out)
		}
		for _, out := range outs {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			seals = append(seals, strings.TrimSpace(line))
		}
		want := openTest(t, path).Seal("c1:0123")
		for i, s := range seals {
			if s != want {
				t.Fatalf("round %d: process %d sealed %q, this one %q", r, i, s, want)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	_, out, _ := startChild(t, "intent", "PENDING_DB="+testDB(t, path))
	first, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "recorded ") {
		t.Fatalf("first process: %q %v", first, err)
	}
	_, out, _ = startChild(t, "hold", "PENDING_DB="+testDB(t, path))
	second, err := out.ReadString('\n')
	if want := "held " + strings.TrimPrefix(first, "recorded "); err != nil || second != want {
		t.Fatalf("second process: %q %v, want %q", second, err, want)
	}
}

// A journal whose secret file is gone, or is another journal's, is refused
// (and not re-sealed under a new secret, which would end every hold).
func TestMissingOrWrongSecretIsRefused(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	openTest(t, path).Close()
	other := filepath.Join(dir, "other.db")
	openTest(t, other).Close()

	if err := os.Rename(secretPath(path), secretPath(path)+".bak"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, ErrSecretMissing) || !strings.Contains(err.Error(), secretPath(path)) {
		t.Fatalf("open without the secret: %v, want ErrSecretMissing naming the file", err)
	}
	if _, err := os.Stat(secretPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused open made a new secret: %v", err)
	}
	if j, err := OpenReadOnly(ctx, path, Options{}); err != nil {
		t.Fatalf("read-only open needs no secret: %v", err)
	} else {
		j.Close()
	}
	b, err := os.ReadFile(secretPath(other))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretPath(path), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, ErrSecretMismatch) {
		t.Fatalf("open with another journal's secret: %v, want ErrSecretMismatch", err)
	}
	if err := os.Rename(secretPath(path)+".bak", secretPath(path)); err != nil {
		t.Fatal(err)
	}
	openTest(t, path)
}

// A journal of schema 3 (bare fingerprints, no secret) is sealed on its
// first writing open, and its open calls still hold identical ones back.
func TestOldJournalIsSealedAndStillHolds(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := createFile(path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:3] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	in := intent("create_order", `{"item":"widget"}`)
	_, err = db.Exec(fmt.Sprintf(`PRAGMA application_id = %d; PRAGMA user_version = 3;
		INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at)
		VALUES ('demo', 'create_order', 'write', 'default', 'old-key', '{"item":"widget"}', ?, 'unknown', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z')`,
		applicationID), in.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	j := openTest(t, path)
	c, err := j.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fingerprint != j.Seal(in.Fingerprint) {
		t.Fatalf("old fingerprint %q not sealed (want %q)", c.Fingerprint, j.Seal(in.Fingerprint))
	}
	in.Hold = true
	var held *HeldError
	if _, err := j.RecordIntent(ctx, in); !errors.As(err, &held) || held.CallID != 1 {
		t.Fatalf("identical intent after sealing: %v, want held by call 1", err)
	}
	j.Close()
	// A second open seals nothing twice.
	j = openTest(t, path)
	if c2, _ := j.Get(ctx, 1); c2.Fingerprint != c.Fingerprint {
		t.Fatalf("second open changed the fingerprint: %q -> %q", c.Fingerprint, c2.Fingerprint)
	}
}
