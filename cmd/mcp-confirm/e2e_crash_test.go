package main

import (
	"bytes"
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bgCall is a `call` running in the background. One goroutine waits for
// it (exec.Cmd.Wait may be called once); everyone else reads done and err.
type bgCall struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{} // closed once the process has exited
	err            error         // Wait's error, set before done is closed
}

// wait blocks until the call has exited and returns Wait's error.
func (b *bgCall) wait() error {
	<-b.done
	return b.err
}

// result is what the call came to once it has exited.
func (b *bgCall) result() cliResult {
	return cliResult{code: b.cmd.ProcessState.ExitCode(), stdout: b.stdout.String(), stderr: b.stderr.String()}
}

// startCall starts `call create_order` in the background; the test kills
// or waits for it.
func (w *world) startCall(t testing.TB, args string, extra []string, serverFlags ...string) *bgCall {
	t.Helper()
	a := append([]string{"call", "create_order", "--args", args}, extra...)
	return w.start(t, w.withDB(append(a, w.server(serverFlags...)...)))
}

// start starts the binary with args (given whole: --db and server included)
// in the background; the test kills or waits for it.
func (w *world) start(t testing.TB, args []string) *bgCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	b := &bgCall{cmd: e2eCmd(ctx, w.bin, w.dir, args...),
		stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = b.stdout, b.stderr
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		cancel() // kills it if still running; WaitDelay bounds the rest
		<-b.done
	})
	return b
}

// waitSentKey waits until exactly one create_order request not in known has
// been written to the demo server, and returns its key.
func (w *world) waitSentKey(t testing.TB, known map[string]bool, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for k := range w.sent("create_order") {
			if !known[k] {
				return k
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new create_order request reached the server in %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRecord waits until the server's idempotency record for key is in
// state (processing: the server is executing it; completed: it committed).
func waitRecord(t testing.TB, db *sql.DB, key, state string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var got string
		err := db.QueryRow("SELECT state FROM idempotency_records WHERE key = ?", key).Scan(&got)
		if err == nil && got == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("idempotency record of %s: want %s within %s, got %q (%v)", key, state, d, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EKillClientMidWrite: `kill -9` of mcp-confirm while its write
// hangs. The next command finds the call unknown ("recovered after unclean
// shutdown") with its one attempt, nothing is resent, and the demo server,
// whose stdin closed with its client, does not outlive it.
func TestE2EKillClientMidWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flags     []string
		record    string // the server's record state when the client is killed
		committed int    // orders the server made
	}{
		{"after commit (lost response)", []string{"--hang-after-commit", "1"}, "completed", 1},
		{"before commit (slow write)", []string{"--delay", "60s"}, "processing", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			db := w.db()
			bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "60s"}, tc.flags...)
			key := w.waitSentKey(t, nil, time.Minute)
			waitRecord(t, db, key, tc.record, time.Minute)
			if pids := demoPIDs(t, w.demoDB); len(pids) != 1 {
				t.Fatalf("want one demo server running, found %v", pids)
			}
			if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := bg.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("the client should have died of SIGKILL, got %v", err)
			}
			// Its stdin closed with the client: the server must exit on its
			// own, without anyone signalling it.
			waitNoDemo(t, w.demoDB, 10*time.Second)

			calls := w.list()
			if len(calls) != 1 {
				t.Fatalf("want 1 call, got %d", len(calls))
			}
			c := calls[0]
			if c.State != "unknown" || c.Reason != "recovered after unclean shutdown" || c.AttemptCount != 1 || c.Key != key {
				t.Fatalf("after kill -9: want unknown, recovered after unclean shutdown, 1 attempt, key %s; got %+v", key, c)
			}
			full := w.show(c.ID)
			if len(full.Attempts) != 1 || full.Attempts[0].Outcome != "unknown" || full.Attempts[0].EndedAt == nil {
				t.Fatalf("the attempt should have been ended unknown by recovery: %+v", full.Attempts)
			}
			if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
				t.Fatalf("nothing may be resent after the crash; wire log has %v", got)
			}
			if n := ordersFor(t, db, key); n != tc.committed {
				t.Fatalf("want %d orders for the key, got %d", tc.committed, n)
			}
			// Recovery is done once; looking again changes nothing.
			if again := w.show(c.ID); again.State != "unknown" || len(again.Attempts) != 1 || !again.UpdatedAt.Equal(full.UpdatedAt) {
				t.Fatalf("a second look changed the call: %+v", again)
			}

			// The operator retries with the same key.
			// The server now runs without the fault: another command line, so
			// the retry names it and says it is the same one (--any-server).
			r := w.run(append([]string{"retry", strconv.FormatInt(c.ID, 10), "--any-server"}, w.server()...)...)
			ro := parseCallOut(t, r)
			switch {
			case tc.committed == 1:
				// The server replays the order it committed before the crash.
				wantExit(t, r, exitOK, "retry after a committed write")
				if ro.State != "succeeded" || !ro.Replayed {
					t.Fatalf("retry: want a replayed success, got %+v", ro)
				}
			case r.code == exitUnknown:
				// The killed server left its claim on the key; until the
				// claim's lease ends the server says "in progress", and the
				// call stays unknown.
				if ro.State != "unknown" || ro.Reason != "server reports in progress" {
					t.Fatalf("retry: want unknown (server reports in progress), got %+v", ro)
				}
				t.Logf("retry within the dead server's lease: %s", ro.Reason)
			default:
				// The server recorded the cancelled execution as retryable
				// before it exited: the retry runs it.
				wantExit(t, r, exitOK, "retry after an uncommitted write")
				if ro.State != "succeeded" || ro.Replayed {
					t.Fatalf("retry: want a fresh success, got %+v", ro)
				}
			}
			if n := ordersFor(t, db, key); n > 1 {
				t.Fatalf("%d orders for one key", n)
			}
			if got := w.sent("create_order"); got[key] != 2 {
				t.Fatalf("want the key sent twice (call, operator's retry), wire log has %v", got)
			}
			if d := duplicateKeys(t, db); len(d) > 0 {
				t.Fatalf("duplicate orders: %v", d)
			}
		})
	}
}

// TestE2EServerCrashMidWrite: the demo server is SIGKILLed while it
// executes the write. The call ends unknown (connection lost) at once, not
// at its 60s timeout, and is not resent on a new session.
func TestE2EServerCrashMidWrite(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	bg := w.startCall(t, `{"item":"gadget","quantity":2,"buyer":"alice"}`, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)
	killPIDs(t, demoPIDs(t, w.demoDB))
	select {
	case <-bg.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the client did not notice the server's death within 30s (its timeout is 60s)")
	}
	if bg.cmd.ProcessState == nil {
		t.Fatal(bg.err)
	}
	r := bg.result()
	wantExit(t, r, exitUnknown, "call whose server was killed")
	if out := parseCallOut(t, r); out.State != "unknown" || out.Key != key {
		t.Fatalf("call output: want unknown with key %s, got %+v", key, out)
	}
	calls := w.list()
	if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != "connection lost" || calls[0].AttemptCount != 1 {
		t.Fatalf("want one unknown call (connection lost), got %+v", calls)
	}
	if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
		t.Fatalf("nothing may be resent after the crash; wire log has %v", got)
	}
	if n := ordersFor(t, db, key); n != 1 {
		t.Fatalf("want the 1 committed order, got %d", n)
	}
}

// TestE2EKillClientDuringRetry: kill -9 during an operator's retry. The
// retry decision and its attempt were durable before the send, so the next
// command finds attempt 2 ended unknown (recovered), attempt 1 as it was,
// and the key on the wire exactly twice.
func TestE2EKillClientDuringRetry(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	r := w.call(`{"item":"gizmo","quantity":1,"buyer":"alice"}`, nil, "--fail-rate", "1")
	wantExit(t, r, exitFailed, "call with --fail-rate 1")
	first := parseCallOut(t, r)

	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	args := w.withDB(append([]string{"retry", strconv.FormatInt(first.ID, 10), "--any-server", "--timeout", "60s"}, w.server("--delay", "60s")...))
	cmd := e2eCmd(ctx, w.bin, w.dir, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, db, first.Key, "processing", time.Minute)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNoDemo(t, w.demoDB, 10*time.Second)

	calls := w.list()
	if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != "recovered after unclean shutdown" || calls[0].AttemptCount != 2 {
		t.Fatalf("after kill -9 during the retry: want one unknown call (recovered) with 2 attempts, got %+v", calls)
	}
	c := w.show(first.ID)
	if c.Attempts[0].N != 1 || c.Attempts[0].Outcome != "failed" || c.Attempts[1].N != 2 || c.Attempts[1].Outcome != "unknown" {
		t.Fatalf("attempts: want 1 failed, 2 unknown; got %+v", c.Attempts)
	}
	if len(c.Decisions) != 1 || c.Decisions[0].Action != "retry" || c.Decisions[0].Attempt != 2 {
		t.Fatalf("decisions: want the retry of attempt 2, got %+v", c.Decisions)
	}
	if got := w.sent("create_order"); got[first.Key] != 2 || len(got) != 1 {
		t.Fatalf("want the key sent twice (call, retry) and nothing else, wire log has %v", got)
	}
	if n := ordersFor(t, db, first.Key); n != 0 {
		t.Fatalf("nothing was committed, yet %d orders", n)
	}
}

// TestE2EConcurrentIdenticalCalls: the same order started four times at
// once, by four processes on one journal. The resend hold is checked in the
// transaction that writes the intent, so exactly one is sent; the others
// are held (exit 4) without a row or a byte on the wire. The one sent
// never answers (lost response) until the test kills its server, so all
// four overlap whatever the machine's load.
func TestE2EConcurrentIdenticalCalls(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	const n = 4
	exited := make(chan *bgCall, n)
	for range n {
		b := w.startCall(t, `{"item":"widget","quantity":3,"buyer":"carol"}`, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
		go func() {
			<-b.done
			exited <- b
		}()
	}
	for range n - 1 {
		select {
		case b := <-exited:
			if r := b.result(); r.code != exitHeld {
				t.Fatalf("want held (exit 4), got %s", r)
			}
		case <-time.After(cmdHang):
			t.Fatal("the identical calls were not held")
		}
	}
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, db, key, "completed", time.Minute)
	killPIDs(t, demoPIDs(t, w.demoDB))
	var winner callOut
	select {
	case b := <-exited:
		r := b.result()
		wantExit(t, r, exitUnknown, "the call that was sent, its server killed")
		winner = parseCallOut(t, r)
	case <-time.After(cmdHang):
		t.Fatal("the sent call did not end")
	}
	if calls := w.list(); len(calls) != 1 || calls[0].ID != winner.ID || winner.Key != key {
		t.Fatalf("want the one journal call %d with key %s, got %+v", winner.ID, key, calls)
	}
	if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
		t.Fatalf("want exactly one create_order on the wire, got %v", got)
	}
	if total := totalOrders(t, db); total != 1 {
		t.Fatalf("want 1 order, got %d", total)
	}
}

// TestE2EInterruptedCall: Ctrl-C (SIGINT) or SIGTERM while the write
// hangs. mcp-confirm does not wait out its 60s timeout and does not leave
// the call in flight: it ends unknown ("cancelled"), exit 3, nothing
// resent, and its server is stopped with it.
func TestE2EInterruptedCall(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			db := w.db()
			bg := w.startCall(t, `{"item":"gadget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
			key := w.waitSentKey(t, nil, time.Minute)
			waitRecord(t, db, key, "completed", time.Minute)
			if err := bg.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-bg.done:
			case <-time.After(30 * time.Second):
				t.Fatalf("mcp-confirm did not stop within 30s of %s (its write timeout is 60s)", sig)
			}
			r := bg.result()
			wantExit(t, r, exitUnknown, "interrupted call")
			if out := parseCallOut(t, r); out.State != "unknown" || out.Reason != "cancelled" || out.Key != key {
				t.Fatalf("want unknown (cancelled) for key %s, got %+v", key, out)
			}
			if pids := demoPIDs(t, w.demoDB); len(pids) > 0 {
				t.Fatalf("the interrupted client left its server running: %v", pids)
			}
			calls := w.list()
			if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != "cancelled" || calls[0].AttemptCount != 1 {
				t.Fatalf("journal: want one unknown call (cancelled), got %+v", calls)
			}
			if got := w.sent("create_order"); got[key] != 1 || len(got) != 1 {
				t.Fatalf("nothing may be resent; wire log has %v", got)
			}
		})
	}
}

// TestE2EKillClientDirectServer is the kill -9 test with the server started
// exactly as a user starts it, its stdin the client's own pipe (no tap in
// between): when the client dies the server sees EOF and must exit.
func TestE2EKillClientDirectServer(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, w.bin, w.dir, "call", "create_order", "--db", w.journal, "--timeout", "60s",
		"--args", `{"item":"widget","quantity":2,"buyer":"carol"}`, "--", w.bin, "demo-server", "--db", w.demoDB, "--hang-after-commit", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var key string
	deadline := time.Now().Add(time.Minute)
	for db.QueryRow("SELECT key FROM idempotency_records WHERE state = 'completed'").Scan(&key) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the write did not commit within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pids := demoPIDs(t, w.demoDB); len(pids) != 1 {
		t.Fatalf("want the one demo server, found %v", pids)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNoDemo(t, w.demoDB, 10*time.Second)
	calls := w.list()
	if len(calls) != 1 || calls[0].Key != key || calls[0].State != "unknown" || calls[0].Reason != "recovered after unclean shutdown" || calls[0].AttemptCount != 1 {
		t.Fatalf("want one unknown call (recovered) with key %s and 1 attempt, got %+v", key, calls)
	}
	if n := ordersFor(t, db, key); n != 1 {
		t.Fatalf("want the 1 committed order, got %d", n)
	}
}

// TestE2ERetryNotSentStaysUnknown: the operator retries a lost write, but
// the server dies after listing its tools and cannot be started again, so
// the retry never leaves. The first attempt did commit an order: the call
// must stay unknown (not "failed", which would say the server answered and
// would refuse abandon and mark applied).
func TestE2ERetryNotSentStaysUnknown(t *testing.T) {
	w := newWorld(t, t.TempDir())
	db := w.db()
	first := parseCallOut(t, w.call(`{"item":"gadget","quantity":2,"buyer":"bob"}`, []string{"--timeout", "2s"}, "--hang-after-commit", "1"))
	if first.State != "unknown" || ordersFor(t, db, first.Key) != 1 {
		t.Fatalf("setup: want an unknown call whose order committed, got %+v", first)
	}
	// First start: pass the client's first two lines (server/discover and
	// tools/list) to the demo server, then stop reading the client's pipe;
	// the server sees EOF and exits. Every later start fails.
	marker := filepath.Join(w.dir, "started")
	script := `if [ -e "$0" ]; then echo "server broken now" >&2; exit 1; fi; touch "$0"
exec "$@" < <(for i in 1 2; do IFS= read -r l || exit; printf '%s\n' "$l"; done)`
	r := w.run("retry", strconv.FormatInt(first.ID, 10), "--any-server", "--", "/bin/bash", "-c", script, marker, w.bin, "demo-server", "--db", w.demoDB)
	switch r.code {
	case exitUnavailable:
		// The retry was journaled, then could not be sent.
	case exitUnknown:
		// The retry's bytes reached the pipe just before the server went:
		// connection lost, also unknown. The case this test is for did not
		// happen this time.
		t.Logf("the retry was written before the server died: %s", r.stdout)
	default:
		t.Fatalf("retry to a server that dies: want exit 5 (not sent) or 3, got %s", r)
	}
	c := w.show(first.ID)
	if c.State != "unknown" || len(c.Attempts) != 2 {
		t.Fatalf("want the call unknown with 2 attempts, got %s with %+v", c.State, c.Attempts)
	}
	if n := ordersFor(t, db, first.Key); n != 1 {
		t.Fatalf("want the 1 order of the first attempt, got %d", n)
	}
	wantExit(t, w.run("abandon", strconv.FormatInt(first.ID, 10), "--note", "refunded"), exitOK, "abandon after the retry that failed to go out")
}
