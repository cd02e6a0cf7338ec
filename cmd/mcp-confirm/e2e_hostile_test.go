package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// A hostile server (mcpclient/testdata/hostile) against the binary: it
// cannot hang `call` past its clock or a signal, hang `tools`, or make the
// process buffer an endless line.

var (
	hostileOnce sync.Once
	hostileBin  string
	hostileErr  error
)

func hostileServer(t *testing.T) string {
	t.Helper()
	hostileOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcp-confirm-hostile-")
		if err != nil {
			hostileErr = err
			return
		}
		hostileBin = filepath.Join(dir, "hostile")
		hostileErr = testbin.Build(hostileBin, "../../mcpclient/testdata/hostile")
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostileBin
}

// bigArgsFile writes arguments of 1 MB, far beyond a pipe's buffer.
func bigArgsFile(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "args.json")
	if err := os.WriteFile(f, []byte(`{"data":"`+strings.Repeat("x", 1<<20)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// startHostile starts mcp-confirm with args against the hostile server in
// mode, in the background.
func startHostile(t *testing.T, w *world, args []string, mode ...string) *bgCall {
	t.Helper()
	return w.start(t, append(w.withDB(args), append([]string{"--", hostileServer(t)}, mode...)...))
}

// waitDone waits for b within a liveness bound (not a timing check).
func waitDone(t *testing.T, b *bgCall, d time.Duration, what string) cliResult {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %s", what, d)
	}
	return b.result()
}

// A write of 1 MB to a server that stopped reading its stdin: the call's
// clock ends it, unknown, exit 3; the journal says unknown.
func TestE2EHostileStdinStallClock(t *testing.T) {
	w := newWorld(t, t.TempDir())
	b := startHostile(t, w, []string{"call", "put", "--args-file", bigArgsFile(t, w.dir), "--timeout", "2s"}, "stall-stdin")
	r := waitDone(t, b, time.Minute, "call against a stalled stdin")
	wantExit(t, r, exitUnknown, "call against a stalled stdin")
	if out := parseCallOut(t, r); out.State != "unknown" {
		t.Fatalf("want unknown, got %+v", out)
	}
	calls := w.list()
	if len(calls) != 1 || calls[0].State != "unknown" || calls[0].AttemptCount != 1 {
		t.Fatalf("journal: want one unknown call, got %+v", calls)
	}
}

// SIGTERM or SIGINT while the write is stalled (no clock would fire for a
// minute) ends the process within seconds, the call unknown in the journal.
func TestE2EHostileStdinStallSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			b := startHostile(t, w, []string{"call", "put", "--args-file", bigArgsFile(t, w.dir), "--timeout", "60s"}, "stall-stdin")
			// The server says on stderr when it stops reading; the CLI
			// swallows that, so wait for the call to be in the journal as
			// in flight instead.
			waitInFlight(t, w)
			if err := b.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			r := waitDone(t, b, 20*time.Second, "call stalled in its write, after "+sig.String())
			wantExit(t, r, exitUnknown, "interrupted stalled call")
			calls := w.list()
			if len(calls) != 1 || calls[0].State != "unknown" {
				t.Fatalf("journal: want one unknown call, got %+v", calls)
			}
		})
	}
}

// waitInFlight waits until the journal holds a call in flight.
func waitInFlight(t *testing.T, w *world) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(w.journal); err == nil {
			r := cliIn(t, w.bin, w.dir, "", "list", "--json", "--db", w.journal)
			if r.code == 0 && strings.Contains(r.stdout, `"in_flight"`) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no call in flight within a minute")
}

// `tools` against a server silent on tools/list: exit 5, the message says
// so (list_timeout shortened by the policy).
func TestE2EHostileSilentList(t *testing.T) {
	w := newWorld(t, t.TempDir())
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[defaults]\nlist_timeout = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startHostile(t, w, []string{"tools", "--policy", policy}, "silent-list")
	r := waitDone(t, b, time.Minute, "tools against a silent server")
	wantExit(t, r, exitUnavailable, "tools against a silent server")
	if !strings.Contains(r.stderr, "the server did not list its tools within 1s; nothing was sent") {
		t.Fatalf("message: %s", r.stderr)
	}
	if !strings.Contains(r.stderr, "raise list_timeout") || strings.Count(r.stderr, "nothing was sent") != 1 {
		t.Errorf("the hint does not say what to do, once: %s", r.stderr)
	}
}

// An endless answer line, against the real 64 MiB limit: the call ends
// unknown, answer too large, and the process never holds the line: its
// peak RSS stays under 300 MB.
func TestE2EHostileEndlessLineMemory(t *testing.T) {
	w := newWorld(t, t.TempDir())
	w.bin = e2eFastBin // the race detector's shadow memory is not ours to bound
	b := startHostile(t, w, []string{"call", "put", "--args", `{"data":"x"}`, "--timeout", "60s"}, "endless")
	r := waitDone(t, b, time.Minute, "call with an endless answer")
	wantExit(t, r, exitUnknown, "call with an endless answer")
	if out := parseCallOut(t, r); out.State != "unknown" || !strings.Contains(r.stderr, "answer too large (over 64 MiB)") {
		t.Fatalf("want unknown, answer too large; got %+v\n%s", out, r)
	}
	ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage on this system")
	}
	peak := ru.Maxrss << 10 // KiB on Linux
	t.Logf("peak RSS %d MiB", peak>>20)
	if peak > 300<<20 {
		t.Fatalf("peak RSS %d MiB, want under 300", peak>>20)
	}
}
