package tui

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// term drives a program in a private tmux server, as a person at a
// terminal would: one key per send-keys, and a wait for the screen before
// every step that depends on it.
type term struct {
	t            *testing.T
	sock, status string
}

func newTerm(t *testing.T, w, h int, env []string, argv ...string) *term {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed; the console's end-to-end test needs it")
		}
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	tm := &term{t: t, sock: filepath.Join(dir, "tmux.sock"), status: filepath.Join(dir, "status")}
	args := []string{"new-session", "-d", "-s", "app", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "-e", "STATUS_FILE=" + tm.status}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, "sh", "-c", `"$0" "$@"; echo $? > "$STATUS_FILE"`)
	tm.run(append(args, argv...)...)
	tm.run("set-option", "-t", "app", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	return tm
}

func (tm *term) run(a ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock, "-f", "/dev/null"}, a...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", a, err, out)
	}
	return string(out)
}

func (tm *term) screen() string { return tm.run("capture-pane", "-p", "-t", "app") }

func (tm *term) press(keys ...string) {
	tm.t.Helper()
	for _, k := range keys {
		tm.run("send-keys", "-t", "app", k)
	}
}

// waitFor polls the screen until it shows every text; the deadline only
// bounds a hang, it is not what the test checks.
func (tm *term) waitFor(texts ...string) {
	tm.t.Helper()
	var s string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		s = tm.screen()
		ok := true
		for _, text := range texts {
			ok = ok && strings.Contains(s, text)
		}
		if ok {
			return
		}
	}
	tm.t.Fatalf("timed out waiting for %q; screen:\n%s", texts, s)
}

// exitCode waits for the program to exit and returns its status.
func (tm *term) exitCode() string {
	tm.t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(tm.status); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	tm.t.Fatalf("the program did not exit; screen:\n%s", tm.screen())
	return ""
}

// The whole operator story on the real binary: a CLI call to the demo
// server loses its answer (unknown); the console, opened in a terminal on
// the same journal, retries it with r y; the journal shows the retry and
// the success, and the demo server's database holds one order.
func TestEndToEndRetryInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux is not installed")
	}
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	dir := t.TempDir()
	journal, demoDB := filepath.Join(dir, "journal.db"), filepath.Join(dir, "demo.db")

	// 1. The unknown call, made by the CLI as a script would.
	call := exec.Command(bin, "call", "create_order", "--db", journal, "--timeout", "2s",
		"--args", `{"item":"widget","quantity":2,"buyer":"alice"}`,
		"--", bin, "demo-server", "--db", demoDB, "--hang-after-commit", "1")
	out, err := call.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("call: want exit 3 (unknown), got %v\n%s", err, out)
	}
	var res struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
		Key   string `json:"key"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.State != "unknown" {
		t.Fatalf("call output %q: %v", out, err)
	}
	if n := countOrders(t, demoDB); n != 1 {
		t.Fatalf("the lost call committed %d orders, want 1", n)
	}

	// 2. The console on the same journal and the call's own server (the same
	// command line: another one is refused, SPEC §9). The fault does not
	// fire again: a replay of a committed key never hangs.
	tm := newTerm(t, 100, 30, []string{"TERM=xterm-256color"}, bin, "--db", journal, "--", bin, "demo-server", "--db", demoDB, "--hang-after-commit", "1")
	tm.waitFor("create_order", "idle timeout", "mcp-confirm-demo running")
	tm.waitFor("retry  safe: create_order declares idempotency_key")
	tm.press("r")
	tm.waitFor("Retry create_order with the same key?", res.Key)
	tm.press("y")
	tm.waitFor("retried create_order key …"+res.Key[len(res.Key)-6:], "succeeded, replayed by the server")
	tm.waitFor("unknown 0")
	tm.press("q")
	if code := tm.exitCode(); code != "0" {
		t.Fatalf("console exit status %s", code)
	}

	// 3. The journal: succeeded, two attempts, the operator's retry.
	show, err := exec.Command(bin, "show", fmt.Sprint(res.ID), "--db", journal, "--json").Output()
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	var c struct {
		State     string            `json:"state"`
		Key       string            `json:"key"`
		Attempts  []json.RawMessage `json:"attempts"`
		Decisions []struct {
			Action string `json:"action"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(show, &c); err != nil {
		t.Fatalf("show output %q: %v", show, err)
	}
	var actions []string
	for _, d := range c.Decisions {
		actions = append(actions, d.Action)
	}
	if c.State != "succeeded" || c.Key != res.Key || len(c.Attempts) != 2 || !strings.Contains(strings.Join(actions, " "), "retry") {
		t.Fatalf("journal after the retry: state %s, %d attempts, decisions %v", c.State, len(c.Attempts), actions)
	}
	// 4. The business system: still one order, under the call's key.
	if n := countOrders(t, demoDB); n != 1 {
		t.Fatalf("the demo database holds %d orders after the retry, want 1", n)
	}
}

func countOrders(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM orders").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A call in flight (a CLI process whose demo server holds its answer),
// seen in the console on the same journal: its preview offers no retry,
// which r and the retry command refuse (State.Allows), and says why
// (issue 44 item 13c).
func TestEndToEndNoRetryOfferForACallInFlight(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux is not installed")
	}
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	dir := t.TempDir()
	journal, demoDB := filepath.Join(dir, "journal.db"), filepath.Join(dir, "demo.db")
	server := []string{"--", bin, "demo-server", "--db", demoDB, "--hang-after-commit", "1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := exec.CommandContext(ctx, bin, append([]string{"call", "create_order", "--db", journal, "--timeout", "120s",
		"--args", `{"item":"widget","quantity":2,"buyer":"alice"}`}, server...)...)
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); call.Wait() }() // also when the test fails
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		out, err := exec.Command(bin, "show", "1", "--db", journal, "--json").Output()
		var c struct{ State string }
		if err == nil && json.Unmarshal(out, &c) == nil && c.State == "in_flight" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("call 1 is not in flight: %v %s", err, out)
		}
	}

	tm := newTerm(t, 100, 30, []string{"TERM=xterm-256color"}, append([]string{bin, "--db", journal}, server...)...)
	tm.waitFor("mcp-confirm-demo running")
	tm.press("Tab") // the in-flight tab
	tm.waitFor("create_order", "retry  not now: in flight, its outcome is coming")
	if s := tm.screen(); strings.Contains(s, "retry  safe:") {
		t.Errorf("the console offers a retry of a call in flight:\n%s", s)
	}
}
