package pending

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func init() {
	// A child started with PENDING_NO_SLOTS=1 owns the journal as on a
	// system without OFD locks: by its lock file and a pid-tagged id.
	if os.Getenv("PENDING_NO_SLOTS") == "1" {
		slotsOff = true
	}
}

// cleanOwners does to the owners folder what a cleaner would, from a
// process of its own: removes it, or replaces each lock file in it by a
// copy (same bytes, a new file that no one has locked).
func cleanOwners(t *testing.T, path, how string) {
	t.Helper()
	dir := ownersDir(path)
	var cmd *exec.Cmd
	switch how {
	case "remove":
		cmd = exec.Command("rm", "-rf", dir)
	case "replace":
		cmd = exec.Command("/bin/sh", "-c", `n=0; for f in "$0"/*.lock; do cp "$f" "$f.copy" && mv "$f.copy" "$f" && n=$((n+1)); done; [ $n -gt 0 ]`, dir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cleaner (%s %s): %v\n%s", how, dir, err, out)
	}
}

// TestOwnerLivesWithoutItsLockFile (issue 44, item 3): a cleaner removes
// the owners folder, or replaces a live owner's lock file, and no other
// process's open, writing or read-only, recovers that owner's call, with
// its lock on the journal (Linux) or by its pid-tagged id (elsewhere, run
// here with PENDING_NO_SLOTS). Once the owner is killed, the next open
// recovers the call as unknown all the same.
func TestOwnerLivesWithoutItsLockFile(t *testing.T) {
	sqliteOnly(t)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"slot", nil}, {"pid-tagged", []string{"PENDING_NO_SLOTS=1"}}} {
		for _, how := range []string{"remove", "replace"} {
			t.Run(mode.name+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "journal.db")
				newJournal(t, path)
				cmd, out, _ := startChild(t, "intent", append([]string{"PENDING_DB=" + path}, mode.env...)...)
				id := readRecorded(t, out)

				cleanOwners(t, path, how)

				j := openTest(t, path)
				assertInFlight(t, j, id)
				c, err := j.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if tagged := strings.Contains(c.Owner, "-p"); tagged != (mode.env != nil) {
					t.Fatalf("owner id %q: want tagged %v", c.Owner, mode.env != nil)
				}
				if _, err := j.Recover(ctx); err != nil {
					t.Fatal(err)
				}
				assertInFlight(t, j, id)
				r, err := OpenReadOnly(ctx, path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				c, err = r.Get(ctx, id)
				r.Close()
				if err != nil || c.State != StateInFlight {
					t.Fatalf("read-only open: call %d is %s (%s), %v", id, c.State, c.Reason, err)
				}
				j.Close()

				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				cmd.Wait()
				k := openTest(t, path)
				if got := k.Recovered(); len(got) != 1 || got[0] != id {
					t.Fatalf("after kill -9: recovered %v, want [%d]", got, id)
				}
				if c, err := k.Get(ctx, id); err != nil || c.State != StateUnknown || c.Reason != ReasonRecovered {
					t.Fatalf("after kill -9: call %d is %s (%s), %v", id, c.State, c.Reason, err)
				}
			})
		}
	}
}

// A pid-tagged owner whose pid now belongs to a later process (another
// start time) is dead; one whose process runs is alive.
func TestTaggedOwnerProcess(t *testing.T) {
	pid, start, ok := taggedProcess("01ARZ3NDEKTSV4RRFFQ69G5FAV" + ownerTag(os.Getpid()))
	if !ok || pid != os.Getpid() {
		t.Fatalf("taggedProcess: %d %q %v", pid, start, ok)
	}
	if !processRuns(pid, start) {
		t.Fatal("this process does not run?")
	}
	if start != "" && processRuns(pid, start+"0") {
		t.Fatal("a pid with another start time is another process")
	}
	if _, _, ok := taggedProcess("01ARZ3NDEKTSV4RRFFQ69G5FAV"); ok {
		t.Fatal("an untagged id has no process")
	}
}
