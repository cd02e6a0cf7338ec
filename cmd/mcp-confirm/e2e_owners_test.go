package main

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// cleanOwners runs a cleaner, as its own process, on the journal's owners
// folder: it removes the folder, or replaces each lock file in it by a
// copy (a new file, unlocked, with the same bytes), as a sync tool or a
// tidy-up script does.
func (w *world) cleanOwners(t *testing.T, how string) {
	t.Helper()
	dir := w.journal + ".owners"
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

// TestE2EOwnerLockCleanedUnderLiveCall: while a write is out (the server
// committed it and holds its answer), a cleaner removes or replaces the
// call's owner lock file. Issue 44, item 3: the next command declared the
// live call "recovered after unclean shutdown", the operator retried, and
// a server that ignores keys ran it twice. Now the live owner is still
// seen alive (its lock on the journal itself), so list shows the call in
// flight and retry refuses it; when the answer comes, the live process
// prints what the journal says.
func TestE2EOwnerLockCleanedUnderLiveCall(t *testing.T) {
	for _, how := range []string{"remove", "replace"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			db := w.db()
			answer := filepath.Join(w.dir, "answer-now")
			bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "120s"},
				"--hang-after-commit", "1", "--answer-when", answer)
			key := w.waitSentKey(t, nil, time.Minute)
			waitRecord(t, db, key, "completed", time.Minute)

			w.cleanOwners(t, how)

			// A read command (which recovers dead owners' calls before it
			// reads) and a writing one (retry opens, and recovers, first).
			calls := w.list()
			if len(calls) != 1 || calls[0].State != "in_flight" || calls[0].Reason != "" || calls[0].Key != key {
				t.Fatalf("with its owner alive, the call must be in flight; list shows %+v", calls)
			}
			id := calls[0].ID
			r := w.run(append([]string{"retry", strconv.FormatInt(id, 10), "--any-server"}, w.server()...)...)
			wantExit(t, r, exitBadInput, "retry of a call in flight")
			if !strings.Contains(r.stderr, "in_flight") {
				t.Fatalf("retry should say the call is in flight:\n%s", r)
			}
			if c := w.show(id); c.State != "in_flight" || len(c.Attempts) != 1 || c.Attempts[0].EndedAt != nil {
				t.Fatalf("after retry was refused: %+v", c)
			}
			select {
			case <-bg.done:
				t.Fatalf("the call ended before its answer was released:\n%s", bg.result())
			default:
			}

			// The server answers; the live process records and prints it.
			if err := os.WriteFile(answer, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := bg.wait(); err != nil {
				t.Fatalf("call: %v\n%s", err, bg.result())
			}
			res := bg.result()
			wantExit(t, res, exitOK, "the live call, answered")
			out := parseCallOut(t, res)
			c := w.show(id)
			if out.State != "succeeded" || out.State != c.State || out.Reason != c.Reason || out.Key != key {
				t.Fatalf("the live process printed %+v; the journal says %s (%q)", out, c.State, c.Reason)
			}
			if len(c.Attempts) != 1 || c.Attempts[0].Outcome != "succeeded" || c.Attempts[0].Late {
				t.Fatalf("want its one attempt succeeded on time: %+v", c.Attempts)
			}
			if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
				t.Fatalf("the key must have been sent once; wire log has %v", got)
			}
			if n := ordersFor(t, db, key); n != 1 {
				t.Fatalf("want 1 order, got %d", n)
			}
		})
	}
}

// TestE2EKillClientOwnersRemoved: the owner's lock file gone AND its
// process killed with SIGKILL: nothing of it lives, so the next command
// recovers its call as unknown, however its lock file went.
func TestE2EKillClientOwnersRemoved(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "120s"}, "--hang-after-commit", "1")
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)
	w.cleanOwners(t, "remove")
	if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := bg.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the client should have died of SIGKILL, got %v", err)
	}
	calls := w.list()
	if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != "recovered after unclean shutdown" ||
		calls[0].AttemptCount != 1 || calls[0].Key != key {
		t.Fatalf("after kill -9: want unknown, recovered after unclean shutdown, 1 attempt; got %+v", calls)
	}
	if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
		t.Fatalf("nothing may be resent after the crash; wire log has %v", got)
	}
}

// TestE2ELiveCallReportsWhatTheJournalSays: the report of a call whose
// attempt another process took for lost while it was out, and which an
// operator then sent again (issue 44, item 3: the live process printed
// "in_flight", an empty reason and "it was NOT resent", which was false).
// A live owner no longer looks dead to a cleaner's work, so the test hands
// the call, in the file, to an owner id no process holds, as a dead
// process leaves it; recovery, the retry and the report are the real ones.
// The retry goes to a server that does not know the key (another demo
// database), as a server that ignores keys would: it runs it again.
func TestE2ELiveCallReportsWhatTheJournalSays(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	answer := filepath.Join(w.dir, "answer-now")
	bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "120s"},
		"--hang-after-commit", "1", "--answer-when", answer)
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)

	id, retry, again := w.takenOverAndRetried(t, key)

	// The first process's answer comes now.
	if err := os.WriteFile(answer, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bg.wait()
	res := bg.result()
	out := parseCallOut(t, res)
	c := w.show(id)
	if out.State != c.State || out.Reason != c.Reason {
		t.Fatalf("the live process printed %s (%q); the journal says %s (%q)\n%s", out.State, out.Reason, c.State, c.Reason, res)
	}
	if strings.Contains(res.stderr, "NOT resent") || !strings.Contains(res.stderr, "attempt 2 was sent by another process") {
		t.Fatalf("the call was sent again (attempt 2); the report must say so, not 'NOT resent':\n%s", res)
	}
	wantExit(t, res, exitUnknown, "a call in flight again elsewhere")
	if a := c.Attempts[0]; a.Outcome != "succeeded" || !a.Late {
		t.Fatalf("the first process's answer should be on attempt 1, late: %+v", a)
	}

	if err := os.WriteFile(again, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	retry.wait()
	wantExit(t, retry.result(), exitOK, "the retry, answered")
	if c := w.show(id); c.State != "succeeded" || len(c.Attempts) != 2 || c.Attempts[1].Outcome != "succeeded" {
		t.Fatalf("after the retry's answer: %+v", c)
	}
}

// The proxy, too, tells its host what the journal says, not what it saw
// (issue 44, item 3): while its write waits on the server, another process
// takes the attempt for lost (its owner id made a dead one's), an operator
// retries it, and attempt 2 is in flight when the server answers the
// proxy's attempt 1. The host gets that answer, the server's own result,
// not an "unknown" with an empty reason; and the journal keeps it as
// attempt 1's late answer, with the call still in flight on attempt 2.
func TestE2EProxyLiveCallAnswersWhatTheJournalSays(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	answer := filepath.Join(w.dir, "answer-now")
	h := w.startProxyHost(t, []string{"--hang-after-commit", "1", "--answer-when", answer})
	type reply struct {
		res *mcp.CallToolResult
		err error
	}
	replied := make(chan reply, 1)
	go func() {
		res, err := h.write(map[string]any{"item": "widget", "quantity": 1, "buyer": "bob"})
		replied <- reply{res, err}
	}()
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)

	id, retry, again := w.takenOverAndRetried(t, key)

	if err := os.WriteFile(answer, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var r reply
	select {
	case r = <-replied:
	case <-time.After(2 * time.Minute):
		t.Fatal("the host got no answer within two minutes of the server's")
	}
	got := classify(r.res, r.err)
	if got.class != answerSucceeded || !strings.Contains(got.text, key) {
		t.Fatalf("the server answered the proxy's attempt, and the host should get that answer; got %+v", got)
	}
	if c := w.show(id); c.State != "in_flight" || c.Attempts[0].Outcome != "succeeded" || !c.Attempts[0].Late {
		t.Fatalf("journal: %+v; want in flight on attempt 2, attempt 1 succeeded, late", c)
	}
	if err := os.WriteFile(again, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	retry.wait()
	wantExit(t, retry.result(), exitOK, "the retry, answered")
}

// takenOverAndRetried stages what a cleaner once did to a live call (the
// call's owner id made a dead one's, since a real cleaner no longer can)
// and what an operator then does: list recovers the call as unknown, and a
// retry sends it again to a server that runs it and holds the answer until
// the file again is written. It returns the call's id and the retry.
func (w *world) takenOverAndRetried(t *testing.T, key string) (id int64, retry *bgCall, again string) {
	t.Helper()
	jdb, err := sql.Open("sqlite", w.journal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jdb.Exec("UPDATE calls SET owner = '01DEADDEADDEADDEADDEADDEAD' WHERE key = ?", key); err != nil {
		t.Fatal(err)
	}
	jdb.Close()
	calls := w.list()
	if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != "recovered after unclean shutdown" {
		t.Fatalf("the call of a dead owner id should have been recovered: %+v", calls)
	}
	id = calls[0].ID
	again = filepath.Join(w.dir, "answer-retry")
	retry = w.start(t, w.withDB([]string{"retry", strconv.FormatInt(id, 10), "--any-server", "--",
		w.bin, "demo-server", "--db", filepath.Join(w.dir, "other.db"), "--hang-after-commit", "1", "--answer-when", again}))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c := w.show(id); c.State == "in_flight" && len(c.Attempts) == 2 {
			return id, retry, again
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retry's attempt 2 was not in flight within a minute: %+v", w.show(id))
		}
	}
}
