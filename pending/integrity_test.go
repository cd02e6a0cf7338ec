package pending

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errorKinds names the typed errors of Open that err is.
func errorKinds(err error) string {
	var names []string
	for _, k := range []struct {
		name string
		err  error
	}{
		{"ErrNotJournal", ErrNotJournal}, {"ErrNewerSchema", ErrNewerSchema}, {"ErrHardLinked", ErrHardLinked},
		{"ErrCorrupt", ErrCorrupt}, {"ErrDiskFull", ErrDiskFull}, {"ErrReadOnly", ErrReadOnly},
		{"ErrLocked", ErrLocked}, {"ErrJournalReplaced", ErrJournalReplaced},
	} {
		if errors.Is(err, k.err) {
			names = append(names, k.name)
		}
	}
	if names == nil {
		return "untyped"
	}
	return strings.Join(names, ",")
}

// readRecorded reads a child's "recorded N" line.
func readRecorded(t *testing.T, out *bufio.Reader) int64 {
	t.Helper()
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "recorded ") {
		t.Fatalf("child: %q %v", line, err)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "recorded ")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newJournal creates a journal at path with its migrations checkpointed into
// the file (opened and closed once), as any journal used before is.
func newJournal(t *testing.T, path string) {
	t.Helper()
	j, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func assertInFlight(t *testing.T, j *Journal, ids ...int64) {
	t.Helper()
	if got := j.Recovered(); len(got) != 0 {
		t.Fatalf("recovered %v while their owner lives", got)
	}
	for _, id := range ids {
		c, err := j.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != StateInFlight {
			t.Fatalf("call %d of a live owner is %s (%s)", id, c.State, c.Reason)
		}
	}
}

// A process that reaches the journal through a symlink, or a path with
// "..", is the same owner to every other process: its calls stay in flight
// while it lives.
func TestJournalReachedBySymlinkKeepsLiveOwners(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	newJournal(t, path)
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	_, out, _ := startChild(t, "intent", "PENDING_DB="+link)
	id := readRecorded(t, out)

	j := openTest(t, path)
	assertInFlight(t, j, id)

	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	if j.Path() != real {
		t.Fatalf("Path() = %s, want %s", j.Path(), real)
	}
	for _, p := range []string{link, filepath.Join(dir, "sub", "..", "journal.db")} {
		os.Mkdir(filepath.Join(dir, "sub"), 0o700)
		k := openTest(t, p)
		if k.Path() != real {
			t.Fatalf("opened as %s: Path() = %s, want %s", p, k.Path(), real)
		}
		assertInFlight(t, k, id)
	}
	if _, err := os.Stat(ownersDir(link)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an owners folder beside the symlink: %v", err)
	}
}

// A cleanup that empties the owners folder while an owner lives: the owner
// puts its lock back before its next durable commit, and no other process
// recovers its calls.
func TestOwnerLockRemovedUnderLiveOwner(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	_, out, stdin := startChild(t, "intents", "PENDING_DB="+path)
	first := readRecorded(t, out)

	locks, err := filepath.Glob(filepath.Join(ownersDir(path), "*"))
	if err != nil || len(locks) != 1 {
		t.Fatalf("owner files: %v %v", locks, err)
	}
	for _, l := range locks {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintln(stdin, "one more")
	second := readRecorded(t, out)

	j := openTest(t, path)
	assertInFlight(t, j, first, second)
}

// The same when the whole owners folder is removed.
func TestOwnersFolderRemovedUnderLiveOwner(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	_, out, stdin := startChild(t, "intents", "PENDING_DB="+path)
	first := readRecorded(t, out)
	if err := os.RemoveAll(ownersDir(path)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "one more")
	second := readRecorded(t, out)

	j := openTest(t, path)
	assertInFlight(t, j, first, second)
}

// Two hard links of one journal would be two WAL files: refused, by either
// name, before anything is written.
func TestHardLinkedJournalRefused(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	j := openTest(t, path)
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"item":"widget"}`)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "other.db")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, link} {
		k, err := Open(ctx, p, Options{})
		if err == nil {
			k.Close()
			t.Fatalf("opened %s with two hard links", p)
		}
		if !errors.Is(err, ErrHardLinked) || !strings.Contains(err.Error(), "the journal has 2 hard links") {
			t.Fatalf("open %s: %v (%s)", p, err, errorKinds(err))
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a refused open changed the file")
	}
	for _, p := range []string{path + "-wal", link + "-wal", ownersDir(link)} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s after a refused open: %v", p, err)
		}
	}
}

// childKeyList runs a child that opens the journal and lists its calls' keys.
func childKeyList(t *testing.T, path string) map[string]bool {
	t.Helper()
	_, out, _ := startChild(t, "keys", "PENDING_DB="+path)
	keys := map[string]bool{}
	for {
		line, err := out.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil || strings.HasPrefix(line, "error") {
			t.Fatalf("child: %q %v", line, err)
		}
		if line == "end" {
			return keys
		}
		keys[line] = true
	}
}

// Removing the WAL and its index under a running process (a cleanup of
// "*-wal *-shm") would have its later commits go to a file no one else
// reads. The next write fails, and so does every one after it; reads on the
// connections already open go on; Close says so too.
func TestRemovedWALFailsWrites(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	// A process that has been running has read through its read connection
	// (one opened after the removal would find no WAL to read).
	if _, err := j.Get(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil {
			t.Fatal(err)
		}
	}
	second := intent("create_order", `{"n":2}`)
	if _, err := j.RecordIntent(ctx, second); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("intent after the WAL was removed: %v", err)
	} else if !strings.Contains(err.Error(), path+"-wal was removed or replaced while open") {
		t.Fatalf("message: %v", err)
	}
	third := intent("create_order", `{"n":3}`)
	if _, err := j.RecordIntent(ctx, third); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("the next intent: %v", err)
	}
	if err := j.RecordOutcome(ctx, first.ID, 1, Outcome{Event: EventSucceeded}); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("an outcome (lazy commit): %v", err)
	}
	if c, err := j.Get(ctx, first.ID); err != nil || c.State != StateInFlight {
		t.Fatalf("read after: %+v %v", c, err)
	}
	if err := j.Close(); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("close: %v", err)
	}
	// Another process sees neither refused intent.
	keys := childKeyList(t, path)
	if keys[second.Key] || keys[third.Key] {
		t.Fatalf("a refused intent reached the journal: %v", keys)
	}
}

// The same for a WAL replaced by another file while open.
func TestReplacedWALFailsWrites(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	j := openTest(t, path)
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+"-wal", path+"-wal.old"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`)); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("intent after the WAL was replaced: %v", err)
	}
}

// What SQLite does with the WAL while this process has the journal open:
// other processes opening, writing (past the automatic checkpoint) and
// closing it, and checkpoints of every kind, reuse the same file. None of
// it may be taken for a replaced WAL.
func TestWALKeptAcrossOtherProcessesAndCheckpoints(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	j := openTest(t, path)
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, out, _ := startChild(t, "open", "PENDING_DB="+path)
		if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "opened" {
			t.Fatalf("child %d: %q %v", i, line, err)
		}
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`)); err != nil {
		t.Fatalf("after other processes opened and closed: %v", err)
	}
	// A process that writes enough for SQLite's automatic checkpoint, then
	// closes.
	cmd, out, stdin := startChild(t, "bulk", "PENDING_DB="+path, "PENDING_TAG=x", "PENDING_N=150")
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "done" {
		t.Fatalf("bulk child: %q %v", line, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":3}`)); err != nil {
		t.Fatalf("after another process wrote and closed: %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"PASSIVE", "FULL", "RESTART", "TRUNCATE"} {
		if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint("+mode+")"); err != nil {
			t.Fatal(err)
		}
		if _, err := j.RecordIntent(ctx, intent("create_order", `{"checkpoint":"`+mode+`"}`)); err != nil {
			t.Fatalf("after checkpoint %s: %v", mode, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":4}`)); err != nil {
		t.Fatalf("after another connection closed: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// A journal whose tail is gone (a truncated copy, a disk that lost it) is
// refused before anything is written, as damaged. SQLite alone takes a file
// that lost part of its last page for sound (it rounds the size up to whole
// pages) and one that lost whole pages for damaged.
func TestTruncatedJournalRefused(t *testing.T) {
	sqliteOnly(t)
	for _, cut := range []int64{1000, 4096} {
		t.Run(fmt.Sprintf("%d bytes cut", cut), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "journal.db")
			j := openTest(t, path)
			for i := range 50 {
				if _, err := j.RecordIntent(ctx, intent("create_order", fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 200)))); err != nil {
					t.Fatal(err)
				}
			}
			// The last pages hold events, which nothing Open does reads.
			for i := range 100 {
				if err := j.RecordEvent(ctx, "test", 0, fmt.Sprintf("event %d %s", i, strings.Repeat("e", 200))); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()-cut); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			k, err := Open(ctx, path, Options{})
			if err == nil {
				_, werr := k.RecordIntent(ctx, intent("create_order", `{"after":"truncation"}`))
				k.Close()
				t.Fatalf("opened a truncated journal (and a write into it returned %v)", werr)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "file shorter than its header says") {
				t.Fatalf("open: %v (%s)", err, errorKinds(err))
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("a refused open changed the file")
			}
		})
	}
}

func TestQuickCheck(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := openTest(t, path)
	for i := range 20 {
		if err := j.RecordEvent(ctx, "test", 0, fmt.Sprintf("event %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if problems, err := j.QuickCheck(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("sound journal: %q %v", problems, err)
	}
	var root, pageSize int64
	if err := j.read.QueryRowContext(ctx, "SELECT rootpage FROM sqlite_master WHERE name = 'events'").Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := j.read.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the events table's root page (read by nothing Open does): its
	// page type byte.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x6b}, (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j = openTest(t, path)
	problems, err := j.QuickCheck(ctx)
	if err != nil || len(problems) == 0 {
		t.Fatalf("damaged journal: %q %v", problems, err)
	}
	t.Logf("quick_check: %q", problems)
}

// sqliteHeader returns a 100-byte SQLite header of a file of pages pages of
// 4096 bytes, its size valid.
func sqliteHeader(pages uint32) []byte {
	h := make([]byte, 100)
	copy(h, sqliteMagic)
	h[16], h[17] = 0x10, 0x00 // 4096
	h[18], h[19] = 2, 2       // WAL
	h[21], h[22], h[23] = 64, 32, 32
	for _, off := range []int{24, 92} { // change counter = version-valid-for
		h[off+3] = 7
	}
	h[28], h[29], h[30], h[31] = byte(pages>>24), byte(pages>>16), byte(pages>>8), byte(pages)
	return h
}

// Every error of Open is reported as what it is, never as "not an
// mcp-confirm journal" for a SQLite file that is damaged, locked or cannot
// be written.
func TestOpenErrorsSayWhatTheyAre(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	random := func(n int) []byte {
		b := make([]byte, n)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"random bytes after the SQLite magic", append([]byte(sqliteMagic), random(4*4096)...)},
		{"random pages under a sound-looking header", append(sqliteHeader(4)[:100:100], random(4*4096-100)...)},
		{"random pages under a header without a valid size", func() []byte {
			h := sqliteHeader(4)
			h[95] = 8 // version-valid-for no longer matches
			return append(h[:100:100], random(4*4096-100)...)
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			if err := os.WriteFile(path, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := Open(ctx, path, Options{})
			if err == nil {
				j.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotJournal) {
				t.Fatalf("open: %v (%s)", err, errorKinds(err))
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, tc.file) {
				t.Fatal("a refused open changed the file")
			}
		})
	}

	t.Run("a write lock held past the busy timeout", func(t *testing.T) {
		// A new journal: its open must migrate, so it needs the write lock
		// (an open that has nothing to write takes none).
		path := filepath.Join(t.TempDir(), "journal.db")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		defer c.ExecContext(ctx, "ROLLBACK")
		start := time.Now()
		j, err := Open(ctx, path, Options{BusyTimeout: 100 * time.Millisecond})
		if err == nil {
			j.Close()
			t.Fatal("opened under another's write lock")
		}
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("open: %v (%s)", err, errorKinds(err))
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("gave up after %v, before the busy timeout", d)
		}
	})

	t.Run("a folder that cannot be written", func(t *testing.T) {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("existing journal %v", existing), func(t *testing.T) {
				dir := worldDir(t)
				path := filepath.Join(dir, "state", "journal.db")
				if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if existing {
					newJournal(t, path)
				}
				kinds, line := openAsOther(t, path)
				if kinds != "ErrReadOnly" {
					t.Fatalf("open: %s", line)
				}
			})
		}
	})
}

// worldDir is a temporary folder others can enter, for a child run as
// another user.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pending-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openAsOther makes the journal's folder one the opening process cannot
// write, opens the journal in a child process, and returns the typed errors
// it got and its line. Run as a user, the folder is made read-only (0500).
// Run as root, whom permission bits do not stop, the files are handed to
// the user nobody and the child runs as nobody, from a copy of the test
// binary nobody can run.
func openAsOther(t *testing.T, path string) (kinds, line string) {
	t.Helper()
	dir := filepath.Dir(path)
	bin := os.Args[0]
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		const nobody = 65534
		bin = filepath.Join(filepath.Dir(dir), "pending.test")
		if err := copyFile(os.Args[0], bin, 0o755); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "PENDING_CHILD=classify", "PENDING_DB="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if _, exited := err.(*exec.ExitError); err != nil && !exited && cred != nil {
		t.Skipf("running as root, and a child cannot run as nobody here (%v): the read-only case needs a user whom permissions stop", err)
	}
	line = strings.TrimSpace(string(out))
	k, _, _ := strings.Cut(strings.TrimPrefix(line, "error "), ":")
	return k, line
}

func copyFile(from, to string, mode fs.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// classify gives the system's errors of a full disk and a read-only file
// system their kinds too (SQLite's own codes are met in the tests above).
func TestClassifySystemErrors(t *testing.T) {
	sqliteOnly(t)
	for _, tc := range []struct {
		errno syscall.Errno
		want  error
	}{
		{syscall.ENOSPC, ErrDiskFull}, {syscall.EDQUOT, ErrDiskFull},
		{syscall.EROFS, ErrReadOnly}, {syscall.EACCES, ErrReadOnly}, {syscall.EPERM, ErrReadOnly},
	} {
		cause := &fs.PathError{Op: "open", Path: "/x/journal.db", Err: tc.errno}
		err := classify(fmt.Errorf("create folder: %w", cause))
		if !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
			t.Errorf("%v: %v (%s)", tc.errno, err, errorKinds(err))
		}
	}
	if err := classify(io.ErrUnexpectedEOF); err != io.ErrUnexpectedEOF {
		t.Errorf("an unknown cause was given a kind: %v", err)
	}
}

// A process whose WAL and index were removed while it had calls in them
// (a settled one, one in flight) writes them back into the journal as it
// now is once it finds the loss: by key, once each, marked re-recorded,
// under ids that name no other call, and beside the call another process
// made meanwhile, which is left as it was. The outcome it then records by
// the call's new id lands on that call.
func TestLostWALCallsWrittenBackByKey(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	settled, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.RecordOutcome(ctx, settled.ID, 1, Outcome{Event: EventSucceeded, Result: []byte(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	open, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Get(ctx, open.ID); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil {
			t.Fatal(err)
		}
	}
	// Another process's call, in the journal as it now is.
	child, out, _ := startChild(t, "intent", "PENDING_DB="+path)
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "recorded ") {
		t.Fatalf("child: %q %v", line, err)
	}
	otherID, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "recorded ")), 10, 64)
	_ = child.Process.Kill()
	_ = child.Wait()

	answer := []byte(`{"content":[{"type":"text","text":"done"}]}`)
	if err := j.RecordOutcome(ctx, open.ID, 1, Outcome{Event: EventSucceeded, Result: answer}); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("an outcome by the old id after the loss: %v", err)
	}
	newID, ok := j.ReRecorded(open.ID)
	if !ok {
		t.Fatalf("call %d not written back: %v", open.ID, j.WALLossError())
	}
	if err := j.RecordOutcomeAfterLoss(ctx, newID, 1, Outcome{Event: EventSucceeded, Result: answer}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("close: %v", err)
	}

	j2 := openTest(t, path)
	calls, err := j2.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]Call{}
	for _, c := range calls {
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	other := intent("create_order", `{"item":"widget"}`).Key
	if o := byKey[other]; len(o) != 1 || o[0].ID != otherID {
		t.Fatalf("the other process's call (id %d): %+v", otherID, o)
	}
	for _, want := range []struct {
		key    string
		reason string
	}{{settled.Key, ""}, {open.Key, ReasonReRecorded}} {
		got := byKey[want.key]
		if len(got) != 1 {
			t.Fatalf("key %s: want it once, found %d", want.key, len(got))
		}
		c, err := j2.Get(ctx, got[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != StateSucceeded || c.Reason != want.reason || len(c.Attempts) != 1 {
			t.Fatalf("key %s: %+v", want.key, c)
		}
		var events int
		if err := j2.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE kind = ? AND call_id = ?`,
			EventReRecorded, c.ID).Scan(&events); err != nil || events != 1 {
			t.Fatalf("key %s: %d %s events (%v)", want.key, events, EventReRecorded, err)
		}
	}
	if c, _ := j2.Get(ctx, newID); string(c.Attempts[0].Result) != string(answer) {
		t.Fatalf("the outcome recorded after the loss: %+v", c.Attempts)
	}
}

// A call whose row reached the file before the WAL was removed (a
// checkpoint had copied it) is not written back a second time: the row
// that survived gets the outcome the lost WAL had, and the mark.
func TestLostWALReconcilesTheRowThatSurvived(t *testing.T) {
	sqliteOnly(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	newJournal(t, path)
	j, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var busy, logged, copied int
	if err := j.read.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &copied); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventFailed, Reason: "refused"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`)); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("an intent after the loss: %v", err)
	}
	if id, ok := j.ReRecorded(c.ID); !ok || id != c.ID {
		t.Fatalf("the surviving call %d: written back as %d %v (%v)", c.ID, id, ok, j.WALLossError())
	}
	j.Close()
	j2 := openTest(t, path)
	calls, err := j2.List(ctx, Filter{})
	if err != nil || len(calls) != 1 {
		t.Fatalf("want the one call, once: %+v %v", calls, err)
	}
	got, err := j2.Get(ctx, c.ID)
	if err != nil || got.State != StateFailed || got.Reason != "refused" || got.Attempts[0].Outcome != OutcomeFailed {
		t.Fatalf("the surviving row: %+v %v", got, err)
	}
	var events int
	if err := j2.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE kind = ? AND call_id = ? AND detail LIKE '%row that survived%'`,
		EventReRecorded, c.ID).Scan(&events); err != nil || events != 1 {
		t.Fatalf("%d %s events on the row that survived (%v)", events, EventReRecorded, err)
	}
	// The row's chain goes on from its intent with a re_recorded link to
	// the state the write-back gave it.
	rep, err := j2.VerifyChain(ctx)
	if err != nil || !rep.Intact() {
		t.Fatalf("verify after the write-back onto the surviving row: %+v %+v %v", rep, rep.Calls, err)
	}
}
