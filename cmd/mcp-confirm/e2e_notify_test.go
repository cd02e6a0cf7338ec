package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// A write whose answer is lost: the policy's [notify] command runs with the
// call as JSON on stdin and in environment variables, and its webhook (a
// real local HTTP server) is POSTed the same JSON, once, before the CLI
// exits.
func TestNotifyOnUnknown(t *testing.T) {
	w := newWorld(t, t.TempDir())
	var mu sync.Mutex
	var posts []string
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.Method+" "+r.Header.Get("Content-Type")+" "+string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	stdinFile, envFile := filepath.Join(w.dir, "event.json"), filepath.Join(w.dir, "event.env")
	policy := filepath.Join(w.dir, "policy.toml")
	cmd := `cat > ` + stdinFile + `; printf '%s %s %s' "$MCP_CONFIRM_EVENT" "$MCP_CONFIRM_CALL_ID" "$MCP_CONFIRM_TOOL" > ` + envFile
	if err := os.WriteFile(policy, []byte("[notify]\ncommand = '''"+cmd+"'''\nwebhook = \""+hook.URL+"/hook\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := w.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "1s", "--policy", policy}, "--hang-after-commit", "1")
	wantExit(t, r, exitUnknown, "a lost write")

	var ev struct {
		Event, Tool, Key, State, Resolve string
		CallID                           int64 `json:"call_id"`
	}
	b, err := os.ReadFile(stdinFile)
	if err != nil {
		t.Fatalf("the notify command did not run: %v\n%s", err, r)
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("the command's stdin is not the event as JSON: %v: %s", err, b)
	}
	if ev.Event != "unknown" || ev.CallID != 1 || ev.Tool != "create_order" || ev.State != "unknown" || ev.Key == "" ||
		!strings.Contains(ev.Resolve, "show 1") {
		t.Errorf("event %+v, want unknown call 1 of create_order with its key and a resolve command", ev)
	}
	if env, _ := os.ReadFile(envFile); string(env) != "unknown 1 create_order" {
		t.Errorf("the command's environment said %q, want \"unknown 1 create_order\"", env)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || !strings.HasPrefix(posts[0], "POST application/json {") || !strings.Contains(posts[0], `"call_id":1`) {
		t.Errorf("webhook got %q, want one POST of the event", posts)
	}
}

// A receiver that fails: the webhook is retried a few times and the
// failure logged; the call's outcome and exit code are as without it. A
// webhook in plain http to another host is refused when the policy loads.
func TestNotifyFailuresNeverChangeTheCall(t *testing.T) {
	w := newWorld(t, t.TempDir())
	var mu sync.Mutex
	tries := 0
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries++
		mu.Unlock()
		http.Error(rw, "down", http.StatusInternalServerError)
	}))
	defer hook.Close()
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[notify]\ncommand = 'exit 7'\nwebhook = \""+hook.URL+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := w.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "1s", "--policy", policy}, "--hang-after-commit", "1")
	wantExit(t, r, exitUnknown, "a lost write with failing receivers")
	if !strings.Contains(r.stderr, "notify webhook failed") || !strings.Contains(r.stderr, "notify command failed") {
		t.Errorf("the failures are not logged:\n%s", r.stderr)
	}
	mu.Lock()
	if tries != 4 {
		t.Errorf("webhook tried %d times, want 4", tries)
	}
	mu.Unlock()

	bad := filepath.Join(w.dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[notify]\nwebhook = \"http://example.com/hook\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = w.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--policy", bad})
	wantExit(t, r, exitBadInput, "a plain-http webhook to another host")
	if !strings.Contains(r.stderr, "plain http is allowed only to a loopback address") {
		t.Errorf("stderr does not say why:\n%s", r.stderr)
	}
}

// A call whose process is killed with kill -9 while its write is out:
// the next process that opens the journal for writing recovers it as
// unknown and, with a policy's [notify], tells of it once (as of any call
// that becomes unknown); a later open does not tell again.
func TestNotifyOnRecoveredCall(t *testing.T) {
	w := newWorld(t, t.TempDir())
	events := filepath.Join(w.dir, "events.jsonl")
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[notify]\ncommand = 'cat >> "+events+"; echo >> "+events+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bg := w.startCall(t, `{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
	key := w.waitSentKey(t, nil, time.Minute)
	waitRecord(t, w.db(), key, "completed", time.Minute)
	if err := bg.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := bg.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the client should have died of SIGKILL, got %v", err)
	}
	if _, err := os.Stat(events); err == nil {
		t.Fatal("a notification before anyone recovered the call")
	}
	for range 2 { // the second open finds nothing left to recover
		r := w.run(append([]string{"call", "find_orders", "--args", `{"buyer":"bob"}`, "--policy", policy}, w.server()...)...)
		wantExit(t, r, exitOK, "a read that opens the journal")
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatalf("the recovered call was not notified: %v", err)
	}
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		got = append(got, ev)
	}
	if len(got) != 1 || got[0]["event"] != "unknown" || got[0]["key"] != key || got[0]["reason"] != "recovered after unclean shutdown" {
		t.Errorf("events %v, want one unknown event for key %s, recovered after unclean shutdown", got, key)
	}
}

// A server whose name carries a NUL byte and an OSC sequence, and whose
// tool's name a hidden-text SGR (testdata/nulname), cannot silence the
// notification that warns of its own unknown call (exec refuses an
// environment variable holding NUL): the [notify] command runs, and the
// values it is given hold no NUL or terminal control, spelled as
// termtext.Name spells them; stdin still carries the event as exact JSON.
func TestNotifyCommandGetsCleanedServerValues(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "nulname")
	if err := testbin.Build(srv, "./testdata/nulname"); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, dir)
	envFile, stdinFile := filepath.Join(dir, "event.env"), filepath.Join(dir, "event.json")
	script := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat > "+stdinFile+"\n"+
		`printf '%s\n' "$MCP_CONFIRM_EVENT" "$MCP_CONFIRM_SERVER" "$MCP_CONFIRM_TOOL" "$MCP_CONFIRM_KEY" "$MCP_CONFIRM_REASON" > `+envFile+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[notify]\ncommand = '"+script+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := w.run("call", "put\x1b[8m", "--args", `{}`, "--timeout", "1s", "--policy", policy, "--", srv)
	wantExit(t, r, exitUnknown, "a write the server never answers")
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("the notify command did not run: %v\n%s", err, r)
	}
	env := string(b)
	for _, bad := range []string{"\x00", "\x1b", "\x07"} {
		if strings.Contains(env, bad) {
			t.Errorf("the command's environment holds a raw %q:\n%q", bad, env)
		}
	}
	lines := strings.Split(env, "\n")
	if len(lines) < 3 || lines[0] != "unknown" || lines[1] != `evil\x00name\x1b]0;pwned\x07-server` || lines[2] != `put\x1b[8m` {
		t.Errorf("the command's environment said %q, want the event, and the server and tool names spelled with \\xNN", env)
	}
	var ev struct{ Server, Tool string }
	if b, err := os.ReadFile(stdinFile); err != nil || json.Unmarshal(b, &ev) != nil ||
		ev.Server != "evil\x00name\x1b]0;pwned\x07-server" || ev.Tool != "put\x1b[8m" {
		t.Errorf("stdin is not the exact event: %v %q", err, b)
	}
}
