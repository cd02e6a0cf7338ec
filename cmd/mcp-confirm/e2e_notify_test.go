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
	"testing"
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
