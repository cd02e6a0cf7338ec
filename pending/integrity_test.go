package pending

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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

// A cleanup that empties the owners folder while an owner lives: the owner
// puts its lock back before its next durable commit, and no other process
// recovers its calls.
func TestOwnerLockRemovedUnderLiveOwner(t *testing.T) {
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
