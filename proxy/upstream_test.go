package proxy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// A host that can sample, elicit and show roots, as VS Code can.
var capableHost = map[string]any{
	"capabilities": map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{"listChanged": true}},
	"roots":        []map[string]any{{"uri": "file:///ts-host/workspace", "name": "workspace"}},
	"elicited":     map[string]any{"name": "Ada Lovelace", "check": true},
}

// In front of server-everything, a host with those capabilities sees what
// it sees directly: the tools the server lists only to such a host, and the
// server's own requests (roots once connected, then sampling and
// elicitation inside tool calls), whose answers come back to the server.
// The two tools that ask are writes, so they are journaled.
func TestTSHostServerRequestsPassThrough(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	journal := filepath.Join(t.TempDir(), "journal.db")
	steps := []step{
		{"op": "listTools"},
		{"op": "call", "name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "a haiku about journals", "maxTokens": 20}},
		{"op": "call", "name": "trigger-elicitation-request", "arguments": map[string]any{}},
		{"op": "call", "name": "get-roots-list", "arguments": map[string]any{}},
		{"op": "serverRequests"},
	}
	direct := tsHostWith(t, capableHost, "node", []string{everything}, steps...)
	proxied := tsHostWith(t, capableHost, bin, append(proxyArgs(journal, "--"), "node", everything), steps...)

	if n := strings.Count(proxied.stderr, "mcp session started"); n != 1 {
		t.Errorf("the proxy started the server %d times, want once: the host's initialize was its first line", n)
	}
	dTools := toolsByName(t, direct, 0)
	for _, name := range []string{"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} {
		if dTools[name] == nil {
			t.Fatalf("server-everything does not list %s even directly: the fixture has changed", name)
		}
	}
	sameTools(t, dTools, toolsByName(t, proxied, 0))

	wants := []string{"ts host sampled: Resource trigger-sampling-request context: a haiku about journals",
		"- Name: Ada Lovelace", "file:///ts-host/workspace"}
	for i, want := range wants {
		var d, p toolResult
		direct.ok(t, i+1, &d)
		proxied.ok(t, i+1, &p)
		if !strings.Contains(d.text(), want) {
			t.Fatalf("step %d directly: %q lacks %q: the fixture has changed", i+1, d.text(), want)
		}
		if p.IsError || !reflect.DeepEqual(d, p) {
			t.Errorf("step %d (%s): direct and proxied answers differ\n direct: %+v\n  proxy: %+v", i+1, steps[i+1]["name"], d, p)
		}
	}

	type asked struct {
		ServerRequests []struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		} `json:"serverRequests"`
	}
	var dAsked, pAsked asked
	direct.ok(t, 4, &dAsked)
	proxied.ok(t, 4, &pAsked)
	byMethod := func(a asked) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, r := range a.ServerRequests {
			m[r.Method] = r.Params
		}
		return m
	}
	d, p := byMethod(dAsked), byMethod(pAsked)
	for _, method := range []string{"roots/list", "sampling/createMessage", "elicitation/create"} {
		if _, ok := p[method]; !ok {
			t.Errorf("the host was not asked %s through the proxy; it was asked %v", method, p)
		}
	}
	for method, params := range d {
		delete(params, "_meta") // the server's progress token, per connection
		delete(p[method], "_meta")
		if !reflect.DeepEqual(params, p[method]) {
			t.Errorf("%s params differ\n direct: %v\n  proxy: %v", method, params, p[method])
		}
	}

	j := openJournal(t, journal)
	got := map[string]pending.State{}
	for _, c := range calls(t, j) {
		got[c.Tool] = c.State
		if c.Key == "" {
			t.Errorf("call %d (%s) has no key", c.ID, c.Tool)
		}
	}
	want := map[string]pending.State{"trigger-sampling-request": pending.StateSucceeded, "trigger-elicitation-request": pending.StateSucceeded}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("journal: %v, want %v (the read get-roots-list is not journaled)", got, want)
	}
}

// server-filesystem serves the host's roots, not its command line's, when
// the host can list roots: through the proxy too.
func TestTSHostFilesystemServesTheHostsRoots(t *testing.T) {
	fsBin := npmfixture.Bin(t, "mcp-server-filesystem")
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	cmdline, hostRoot := filepath.Join(dir, "cmdline"), filepath.Join(dir, "host-root")
	for _, d := range []string{cmdline, hostRoot} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	host := map[string]any{
		"capabilities": map[string]any{"roots": map[string]any{"listChanged": true}},
		"roots":        []map[string]any{{"uri": "file://" + hostRoot, "name": "host root"}},
	}
	// The server takes the roots after its handshake, asynchronously.
	steps := []step{{"op": "callUntil", "name": "list_allowed_directories", "arguments": map[string]any{}, "contains": hostRoot}}
	journal := filepath.Join(dir, "journal.db")
	direct := tsHostWith(t, host, "node", []string{fsBin, cmdline}, steps...)
	proxied := tsHostWith(t, host, bin, append(proxyArgs(journal, "--"), "node", fsBin, cmdline), steps...)
	var d, p toolResult
	direct.ok(t, 0, &d)
	proxied.ok(t, 0, &p)
	if !strings.Contains(d.text(), hostRoot) {
		t.Fatalf("directly, server-filesystem allows %q, not the host's root %s: the fixture has changed", d.text(), hostRoot)
	}
	if !reflect.DeepEqual(d, p) {
		t.Errorf("allowed directories: direct %q, proxy %q", d.text(), p.text())
	}
}

// In front of the demo (which speaks 2026-07-28 too), a capable legacy
// host gets the server started once, on the host's own protocol, with its
// capabilities; calls work, and the demo asks the host nothing.
func TestTSHostCapableBeforeAModernServer(t *testing.T) {
	dir := t.TempDir()
	args := append(proxyArgs(filepath.Join(dir, "journal.db"), "--"), bin, "demo-server", "--db", filepath.Join(dir, "demo.db"))
	run := tsHostWith(t, capableHost, bin, args,
		step{"op": "listTools"},
		step{"op": "call", "name": "get_budget", "arguments": map[string]any{"buyer": "alice"}},
		step{"op": "serverRequests"},
	)
	if toolsByName(t, run, 0)["create_order"] == nil {
		t.Fatal("the demo's tools are not listed")
	}
	var budget toolResult
	run.ok(t, 1, &budget)
	if budget.IsError || budget.text() == "" {
		t.Fatalf("get_budget: %+v", budget)
	}
	if n := strings.Count(run.stderr, "mcp session started"); n != 1 || !regexp.MustCompile(`"mcp session started".* protocol=2025-11-25`).MatchString(run.stderr) {
		t.Errorf("the demo was started %d times, or not on the host's 2025-11-25:\n%s", n, run.stderr)
	}
	var asked struct {
		ServerRequests []any `json:"serverRequests"`
	}
	run.ok(t, 2, &asked)
	if len(asked.ServerRequests) != 0 {
		t.Errorf("the host was asked %v", asked.ServerRequests)
	}
}

// A server whose tools/list asks the host for its roots: the host's
// initialize cannot wait for that list (the host answers only once
// initialized), so it is answered first and the tools follow; the host
// gets them all, and can call the one made for its root.
func TestTSHostToolsThatNeedTheHostsRoots(t *testing.T) {
	dir := npmfixture.Dir(t)
	server := []string{filepath.Join("testdata", "roots-server.mjs")}
	host := map[string]any{
		"capabilities": map[string]any{"roots": map[string]any{}},
		"roots":        []map[string]any{{"uri": "file:///ts-host/workspace", "name": "workspace"}},
	}
	steps := []step{
		{"op": "listToolsUntil", "name": "scan-workspace"},
		{"op": "call", "name": "scan-workspace", "arguments": map[string]any{}},
	}
	t.Setenv("NPM_FIXTURE", dir)
	direct := tsHostWith(t, host, "node", server, steps...)
	proxied := tsHostWith(t, host, bin, append(proxyArgs(filepath.Join(t.TempDir(), "journal.db"), "--"), append([]string{"node"}, server...)...), steps...)
	dTools := toolsByName(t, direct, 0)
	if dTools["scan-workspace"] == nil {
		t.Fatalf("directly, the server lists %v: the fixture is wrong", dTools)
	}
	sameTools(t, dTools, toolsByName(t, proxied, 0))
	var d, p toolResult
	direct.ok(t, 1, &d)
	proxied.ok(t, 1, &p)
	if p.IsError || !reflect.DeepEqual(d, p) || p.text() != "ran scan-workspace" {
		t.Errorf("scan-workspace: direct %+v, proxy %+v", d, p)
	}
}

// A server that cannot start: the host's initialize is answered with an
// error saying so, and the proxy exits unavailable (5).
func TestInitializeAnsweredWhenTheServerCannotStart(t *testing.T) {
	cmd := exec.Command(bin, "proxy", "--db", filepath.Join(t.TempDir(), "journal.db"), "--", filepath.Join(t.TempDir(), "no-such-server"))
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}` + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("exit: %v, want 5\nstderr: %s", err, stderr.String())
	}
	var resp struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || resp.ID != 1 || !strings.Contains(resp.Error.Message, "did not start") {
		t.Fatalf("stdout %q (%v): want an error answer to the initialize", stdout.String(), err)
	}
}

// A server slow to list its tools, which asks the host nothing: the host's
// initialize waits for the list, however long, so its first tools/list has
// them all.
func TestTSHostSlowToolList(t *testing.T) {
	t.Setenv("NPM_FIXTURE", npmfixture.Dir(t))
	run := tsHostWith(t, map[string]any{"env": map[string]any{"LIST_DELAY_MS": "3000"}}, bin,
		append(proxyArgs(filepath.Join(t.TempDir(), "journal.db"), "--"), "node", filepath.Join("testdata", "roots-server.mjs")),
		step{"op": "listTools"})
	if toolsByName(t, run, 0)["status"] == nil {
		t.Fatalf("the host's first tools/list lacks the server's tool")
	}
}
