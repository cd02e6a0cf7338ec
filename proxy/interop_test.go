package proxy_test

// Interop with software nobody here wrote: the official TypeScript SDK's
// Client and StdioClientTransport (@modelcontextprotocol/sdk 1.32.2, as
// most hosts embed it) spawn the built mcp-confirm proxy, in front of the
// demo server and in front of the reference servers from npm. Versions are
// pinned by internal/npmfixture; the tests skip only where node is missing.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// tsRun is what ts-host.mjs prints: the result (or error) of every step.
type tsRun struct {
	SDK          string   `json:"sdk"`
	ConnectError *tsError `json:"connectError"`
	Steps        []struct {
		Op    string          `json:"op"`
		OK    json.RawMessage `json:"ok"`
		Error *tsError        `json:"error"`
	} `json:"steps"`
	stderr string // the host's, with the proxy's log and the server's stderr
}

type tsError struct {
	Code    *int   `json:"code"`
	Message string `json:"message"`
}

type step map[string]any

// tsHost runs the TypeScript SDK host against command args.
func tsHost(t *testing.T, command string, args []string, steps ...step) tsRun {
	t.Helper()
	return tsHostWith(t, nil, command, args, steps...)
}

// tsHostWith runs it with more of the plan (capabilities, roots, elicited:
// see ts-host.mjs).
func tsHostWith(t *testing.T, extra map[string]any, command string, args []string, steps ...step) tsRun {
	t.Helper()
	dir := npmfixture.Dir(t)
	p := map[string]any{"command": command, "args": args, "steps": steps}
	for k, v := range extra {
		p[k] = v
	}
	plan, _ := json.Marshal(p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "ts-host.mjs"), string(plan))
	cmd.Env = append(os.Environ(), "NPM_FIXTURE="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ts host: %v\nstderr:\n%s", err, stderr.String())
	}
	var run tsRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		t.Fatalf("ts host output: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	run.stderr = stderr.String()
	if run.SDK != "1.32.2" {
		t.Fatalf("ts host ran SDK %q, want the pinned 1.32.2", run.SDK)
	}
	if run.ConnectError != nil {
		t.Fatalf("ts host could not connect: %s\nstderr:\n%s", run.ConnectError.Message, stderr.String())
	}
	if len(run.Steps) != len(steps) {
		t.Fatalf("ts host ran %d of %d steps", len(run.Steps), len(steps))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ts host stderr (proxy and server logs):\n%s", stderr.String())
		}
	})
	return run
}

// ok decodes step i's result, failing if the step failed.
func (r tsRun) ok(t *testing.T, i int, v any) {
	t.Helper()
	s := r.Steps[i]
	if s.Error != nil {
		t.Fatalf("step %d (%s) failed: %s", i, s.Op, s.Error.Message)
	}
	if err := json.Unmarshal(s.OK, v); err != nil {
		t.Fatalf("step %d (%s): %v: %s", i, s.Op, err, s.OK)
	}
}

// toolResult is a CallToolResult as the SDK returns it.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

func (r toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func proxyArgs(journal string, extra ...string) []string {
	return append([]string{"proxy", "--db", journal}, extra...)
}

func openJournal(t *testing.T, path string) *pending.Journal {
	t.Helper()
	j, err := pending.Open(context.Background(), path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// The lost response, driven by the TypeScript SDK host: the demo server
// commits the first create_order and never answers; the proxy answers
// unknown after its 2 s timeout (the SDK's own would be 60 s); the resend is
// held; the demo's database has one order.
func TestTSHostDemoLostResponse(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.db")
	args := append(proxyArgs(journal, "--timeout", "2s", "--"), bin, "demo-server", "--db", filepath.Join(dir, "demo.db"), "--hang-after-commit", "1")
	orderArgs := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	run := tsHost(t, bin, args,
		step{"op": "listTools"},
		step{"op": "call", "name": "create_order", "arguments": orderArgs},
		step{"op": "call", "name": "create_order", "arguments": orderArgs},
		step{"op": "call", "name": "find_orders", "arguments": map[string]any{"buyer": "alice"}},
	)
	var unknown, held, found toolResult
	run.ok(t, 1, &unknown)
	run.ok(t, 2, &held)
	run.ok(t, 3, &found)

	sc := unknown.StructuredContent
	if !unknown.IsError || sc["mcp-confirm"] != "unknown" || sc["key"] == nil || sc["call_id"] == nil {
		t.Fatalf("want the unknown answer, got %+v", unknown)
	}
	for _, want := range []string{"Do NOT retry", "operator", "mcp-confirm"} {
		if !strings.Contains(unknown.text(), want) {
			t.Errorf("the unknown answer does not say %q: %q", want, unknown.text())
		}
	}
	if !held.IsError || held.StructuredContent["mcp-confirm"] != "held" || held.StructuredContent["call_id"] != sc["call_id"] {
		t.Fatalf("want the held answer for call %v, got %+v", sc["call_id"], held)
	}
	orders, _ := found.StructuredContent["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["idempotency_key"] != sc["key"] {
		t.Fatalf("want exactly one order, under key %v: %+v", sc["key"], found.StructuredContent)
	}

	j := openJournal(t, journal)
	cs := calls(t, j)
	if len(cs) != 1 {
		t.Fatalf("journal has %d calls, want 1", len(cs))
	}
	c := getCall(t, j, cs[0].ID)
	if c.State != pending.StateUnknown || len(c.Attempts) != 1 || c.Key != sc["key"] || c.Tool != "create_order" {
		t.Fatalf("journal: %s, %d attempts, key %s; want unknown, 1 attempt, key %v", c.State, len(c.Attempts), c.Key, sc["key"])
	}
}

// toolsByName indexes a tools/list result; mcp-go lists tools sorted by
// name, so order is not compared.
func toolsByName(t *testing.T, r tsRun, i int) map[string]map[string]any {
	t.Helper()
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	r.ok(t, i, &list)
	m := map[string]map[string]any{}
	for _, tool := range list.Tools {
		m[tool["name"].(string)] = tool
	}
	return m
}

// sameTools compares what a host sees of each tool, directly and through
// the proxy: description, schemas and annotations, key for key.
func sameTools(t *testing.T, direct, proxied map[string]map[string]any) {
	t.Helper()
	if len(direct) == 0 || len(direct) != len(proxied) {
		t.Fatalf("direct lists %d tools, the proxy %d", len(direct), len(proxied))
	}
	for name, d := range direct {
		p, ok := proxied[name]
		if !ok {
			t.Errorf("the proxy does not list %s", name)
			continue
		}
		for _, field := range []string{"title", "description", "inputSchema", "outputSchema", "annotations", "execution", "_meta", "icons"} {
			if !reflect.DeepEqual(d[field], p[field]) {
				t.Errorf("tool %s: %s differs\n direct: %v\n  proxy: %v", name, field, d[field], p[field])
			}
		}
	}
}

// A read of server-everything's; identical directly and through the proxy.
var everythingReads = []step{
	{"op": "serverInfo"},
	{"op": "listTools"},
	{"op": "listResources"},
	{"op": "readResource", "uri": "demo://resource/static/document/architecture.md"},
	{"op": "listPrompts"},
	{"op": "getPrompt", "name": "args-prompt", "arguments": map[string]any{"city": "Paris", "state": "TX"}},
	{"op": "complete", "ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"}, "argument": map[string]any{"name": "department", "value": "E"}},
	{"op": "call", "name": "echo", "arguments": map[string]any{"message": "hello through the proxy"}},
	{"op": "call", "name": "get-sum", "arguments": map[string]any{"a": 2, "b": 3}},
	{"op": "call", "name": "get-structured-content", "arguments": map[string]any{"location": "Chicago"}},
	{"op": "setLevel", "level": "debug"},
	{"op": "call", "name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 3}, "progress": true},
}

// In front of server-everything: the same tools (schemas, annotations),
// resources, prompts, completions and read results as the server gives
// directly; progress reaches the host under its own token; reads are not
// journaled.
func TestTSHostEverythingPassesThrough(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	journal := filepath.Join(t.TempDir(), "journal.db")
	direct := tsHost(t, "node", []string{everything}, everythingReads...)
	proxied := tsHost(t, bin, append(proxyArgs(journal, "--"), "node", everything), everythingReads...)

	var dInfo, pInfo struct {
		ServerInfo   map[string]any `json:"serverInfo"`
		Capabilities map[string]any `json:"capabilities"`
		Instructions *string        `json:"instructions"`
	}
	direct.ok(t, 0, &dInfo)
	proxied.ok(t, 0, &pInfo)
	for _, f := range []string{"name", "version", "title"} {
		if dInfo.ServerInfo[f] != pInfo.ServerInfo[f] {
			t.Errorf("serverInfo %s: direct %v, proxy %v", f, dInfo.ServerInfo[f], pInfo.ServerInfo[f])
		}
	}
	if !reflect.DeepEqual(dInfo.Instructions, pInfo.Instructions) {
		t.Errorf("instructions differ: direct %v, proxy %v", dInfo.Instructions, pInfo.Instructions)
	}
	for _, c := range []string{"tools", "resources", "prompts", "logging", "completions"} {
		if !reflect.DeepEqual(dInfo.Capabilities[c], pInfo.Capabilities[c]) {
			t.Errorf("capability %s: direct %v, proxy %v", c, dInfo.Capabilities[c], pInfo.Capabilities[c])
		}
	}
	sameTools(t, toolsByName(t, direct, 1), toolsByName(t, proxied, 1))

	for i := 2; i <= 10; i++ {
		var d, p any
		direct.ok(t, i, &d)
		proxied.ok(t, i, &p)
		if !reflect.DeepEqual(d, p) {
			t.Errorf("step %d (%s): direct and proxied answers differ\n direct: %v\n  proxy: %v", i, everythingReads[i]["op"], d, p)
		}
	}

	var long struct {
		Result   toolResult       `json:"result"`
		Progress []map[string]any `json:"progress"`
	}
	proxied.ok(t, 11, &long)
	if long.Result.IsError || len(long.Progress) == 0 {
		t.Fatalf("long-running read through the proxy: isError %v, %d progress notifications; want a result and progress",
			long.Result.IsError, len(long.Progress))
	}

	if cs := calls(t, openJournal(t, journal)); len(cs) != 0 {
		t.Errorf("reads were journaled: %d calls", len(cs))
	}
}

// server-everything's trigger-long-running-operation, classed a write by
// the policy (the server annotates it read-only), with a 1 s timeout: the
// host gets the unknown answer long before the tool ends, the resend is
// held, and the journal holds one unknown call with one attempt.
func TestTSHostLongRunningWriteBecomesUnknown(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.db")
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[tools.trigger-long-running-operation]\nkind = \"write\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := map[string]any{"duration": 30, "steps": 2}
	run := tsHost(t, bin, append(proxyArgs(journal, "--policy", policy, "--timeout", "1s", "--"), "node", everything),
		step{"op": "call", "name": "trigger-long-running-operation", "arguments": long},
		step{"op": "call", "name": "trigger-long-running-operation", "arguments": long},
	)
	var first, second toolResult
	run.ok(t, 0, &first)
	run.ok(t, 1, &second)
	if !first.IsError || first.StructuredContent["mcp-confirm"] != "unknown" {
		t.Fatalf("want the unknown answer, got %+v", first)
	}
	if second.StructuredContent["mcp-confirm"] != "held" || second.StructuredContent["call_id"] != first.StructuredContent["call_id"] {
		t.Fatalf("want the resend held, got %+v", second)
	}
	j := openJournal(t, journal)
	cs := calls(t, j)
	if len(cs) != 1 {
		t.Fatalf("journal has %d calls, want 1", len(cs))
	}
	c := getCall(t, j, cs[0].ID)
	if c.State != pending.StateUnknown || len(c.Attempts) != 1 || c.KindSource != pending.KindSource("policy") {
		t.Fatalf("journal: %s, %d attempts, kind from %s; want unknown, 1 attempt (not resent), kind from policy", c.State, len(c.Attempts), c.KindSource)
	}
}

// In front of server-filesystem: the same tools; a read passes through
// with the same answer as direct; a write is journaled with its key and
// done once.
func TestTSHostFilesystem(t *testing.T) {
	fsBin := npmfixture.Bin(t, "mcp-server-filesystem")
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	root, _ = filepath.EvalSymlinks(root)
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, "journal.db")
	read := step{"op": "call", "name": "read_text_file", "arguments": map[string]any{"path": filepath.Join(root, "a.txt")}}
	direct := tsHost(t, "node", []string{fsBin, root}, step{"op": "listTools"}, read)
	proxied := tsHost(t, bin, append(proxyArgs(journal, "--"), "node", fsBin, root),
		step{"op": "listTools"}, read,
		step{"op": "call", "name": "write_file", "arguments": map[string]any{"path": filepath.Join(root, "b.txt"), "content": "written once\n"}},
	)
	sameTools(t, toolsByName(t, direct, 0), toolsByName(t, proxied, 0))
	var dRead, pRead, write toolResult
	direct.ok(t, 1, &dRead)
	proxied.ok(t, 1, &pRead)
	if !reflect.DeepEqual(dRead, pRead) || !strings.Contains(pRead.text(), "hello") {
		t.Errorf("read_text_file: direct %+v, proxy %+v", dRead, pRead)
	}
	proxied.ok(t, 2, &write)
	if write.IsError {
		t.Fatalf("write_file through the proxy: %s", write.text())
	}
	if b, err := os.ReadFile(filepath.Join(root, "b.txt")); err != nil || string(b) != "written once\n" {
		t.Fatalf("b.txt: %q %v", b, err)
	}
	j := openJournal(t, journal)
	cs := calls(t, j)
	if len(cs) != 1 {
		t.Fatalf("journal has %d calls, want 1 (the write; reads are not journaled)", len(cs))
	}
	c := getCall(t, j, cs[0].ID)
	if c.Tool != "write_file" || c.State != pending.StateSucceeded || c.Key == "" || len(c.Attempts) != 1 ||
		c.KindSource != pending.KindSource("annotation") || !strings.Contains(string(c.Args), "written once") {
		t.Fatalf("journal: %+v", c)
	}
}

// The server's log messages reach the host: logging/setLevel is relayed
// down, notifications/message up.
func TestTSHostLogMessagesPassThrough(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	journal := filepath.Join(t.TempDir(), "journal.db")
	run := tsHost(t, bin, append(proxyArgs(journal, "--"), "node", everything),
		step{"op": "setLevel", "level": "debug"},
		step{"op": "call", "name": "toggle-simulated-logging", "arguments": map[string]any{}},
		step{"op": "waitLog"},
	)
	var toggled toolResult
	run.ok(t, 1, &toggled)
	if toggled.IsError {
		t.Fatalf("toggle-simulated-logging: %s", toggled.text())
	}
	var got struct {
		Logs []map[string]any `json:"logs"`
	}
	run.ok(t, 2, &got)
	if len(got.Logs) == 0 || got.Logs[0]["level"] == nil {
		t.Fatalf("want the server's log messages, got %v", got.Logs)
	}
	// toggle-simulated-logging is not annotated read-only: a write, journaled.
	if cs := calls(t, openJournal(t, journal)); len(cs) != 1 || cs[0].Tool != "toggle-simulated-logging" || cs[0].State != pending.StateSucceeded {
		t.Errorf("journal: %+v", cs)
	}
}

// The server named in a Claude Desktop style config (--config, --server):
// the call remembers the config name.
func TestTSHostConfigFileServer(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.db")
	config := filepath.Join(dir, "claude_desktop_config.json")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"orders": map[string]any{"command": bin, "args": []string{"demo-server", "--db", filepath.Join(dir, "demo.db")}},
	}})
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	run := tsHost(t, bin, proxyArgs(journal, "--config", config, "--server", "orders"),
		step{"op": "call", "name": "create_order", "arguments": map[string]any{"item": "gadget", "quantity": 1, "buyer": "carol"}},
	)
	var created toolResult
	run.ok(t, 0, &created)
	if created.IsError || created.StructuredContent["order_id"] == nil {
		t.Fatalf("create_order: %+v", created)
	}
	cs := calls(t, openJournal(t, journal))
	if len(cs) != 1 || cs[0].State != pending.StateSucceeded || cs[0].ServerAlias != "orders" || cs[0].Server != "mcp-confirm-demo" {
		t.Fatalf("journal: %+v", cs)
	}
}
